# expect: WRONG_GRADIENT
# The value is right but w2 is behind stop_gradient, so its gradient is zero.
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        h = jax.nn.relu(x @ w1)
        return jnp.sum((h @ jax.lax.stop_gradient(w2)) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
