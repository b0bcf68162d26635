# expect: WRONG_GRADIENT
# A hand-written VJP that saves only x (the right residual) but drops the inner factor cos(x).
import jax
import jax.numpy as jnp


@jax.custom_vjp
def sin_sin(x):
    return jnp.sin(jnp.sin(x))


def sin_sin_fwd(x):
    return sin_sin(x), x


def sin_sin_bwd(x, g):
    return (g * jnp.cos(jnp.sin(x)),)  # should also multiply by jnp.cos(x)


sin_sin.defvjp(sin_sin_fwd, sin_sin_bwd)


def remat_sin_sin(x):
    return sin_sin(x)
