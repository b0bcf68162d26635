# expect: WRONG_POLICY
# Right math, no jax.checkpoint: autodiff keeps cos(x) and cos(sin(x)) instead of x.
import jax.numpy as jnp


def remat_sin_sin(x):
    return jnp.sin(jnp.sin(x))
