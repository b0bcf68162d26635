# expect: WRONG_ANSWER
# Multiplies sin(x) by itself instead of applying sin to it, under the right checkpoint.
import jax
import jax.numpy as jnp


def remat_sin_sin(x):
    return jax.checkpoint(lambda v: jnp.sin(v) * jnp.sin(v))(x)
