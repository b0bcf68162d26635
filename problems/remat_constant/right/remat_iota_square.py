# expect: ACCEPTED
# Style: the jax.remat alias in call form, with the positions from lax.iota and the square as
# jnp.square.
import jax
import jax.numpy as jnp
from jax import lax


def remat_constant(x):
    def scaled(v):
        positions = lax.iota(jnp.float32, v.shape[0])
        return jnp.square(jnp.sin(positions)) * v

    return jax.remat(scaled)(x)
