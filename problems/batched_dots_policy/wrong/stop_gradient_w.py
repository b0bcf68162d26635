# expect: WRONG_GRADIENT
# The value is right, but w is behind stop_gradient, so its gradient is zero.
import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    def loss(x, w):
        y = jnp.einsum("bmk,bkp->bmp", x, jax.lax.stop_gradient(w))
        return jnp.sum(jnp.tanh(y) ** 2)

    return jax.checkpoint(loss, policy=jax.checkpoint_policies.dots_saveable)(x, w)
