"""Reference solution of remat_constant. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp


def remat_constant(x):
    def scaled(x):
        a = jnp.sin(jnp.arange(x.shape[0], dtype=jnp.float32)) ** 2
        return a * x

    return jax.checkpoint(scaled)(x)
