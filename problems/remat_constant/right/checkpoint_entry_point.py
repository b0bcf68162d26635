# expect: ACCEPTED
# Style: the entry point itself decorated with @jax.checkpoint, so the constant is built inside it.
import jax
import jax.numpy as jnp


@jax.checkpoint
def remat_constant(x):
    a = jnp.sin(jnp.arange(x.shape[0])) ** 2      # integer arange: jnp.sin returns float32
    return x * a
