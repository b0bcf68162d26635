# expect: WRONG_POLICY
# Plain jax.checkpoint (no policy: the backward pass redoes both matmuls), plus an exact zero,
# sin(x) - sin(x), added to x outside the checkpoint. Autodiff of that zero keeps cos(x) twice, and
# the checkpoint keeps the new x: the shapes happen to be the reference's (f32[d, d] x2,
# f32[N, d] x3), but two of the f32[N, d] values are not the matmul outputs.
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    x = x + (jnp.sin(x) - jnp.sin(x))
    return jax.checkpoint(pipeline)(w1, w2, x)
