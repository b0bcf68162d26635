# expect: ACCEPTED
# Style: the `jax.remat` alias used as a decorator on a nested helper.
import jax
import jax.numpy as jnp


def remat_sin_sin(x):
    @jax.remat
    def sin_sin(v):
        inner = jnp.sin(v)
        return jnp.sin(inner)

    return sin_sin(x)
