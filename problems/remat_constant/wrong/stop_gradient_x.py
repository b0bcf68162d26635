# expect: WRONG_GRADIENT
# The value is right, but x is behind stop_gradient, so its gradient is zero.
import jax
import jax.numpy as jnp


def remat_constant(x):
    def scaled(x):
        a = jnp.sin(jnp.arange(x.shape[0], dtype=jnp.float32)) ** 2
        return a * jax.lax.stop_gradient(x)

    return jax.checkpoint(scaled)(x)
