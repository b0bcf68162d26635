# expect: ACCEPTED
# weights kept [out, in] as PyTorch does: the saved product is the same value
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1t, w2t, x):
        h = jax.nn.relu(jnp.einsum("nd,od->no", x, w1t))
        return jnp.sum(jnp.einsum("nd,od->no", h, w2t) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1.T, w2.T, x)
