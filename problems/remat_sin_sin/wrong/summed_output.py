# expect: WRONG_ANSWER
# Sums the result to a scalar, as one would for jax.grad; the task asks for the (N,) array.
import jax
import jax.numpy as jnp


def remat_sin_sin(x):
    return jnp.sum(jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)))(x))
