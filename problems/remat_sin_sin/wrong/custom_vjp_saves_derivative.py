# expect: WRONG_POLICY
# A hand-written VJP that saves the whole derivative cos(sin x) * cos(x) instead of x: one f32[N],
# the right shape, but a different value from the input jax.checkpoint keeps.
import jax
import jax.numpy as jnp


@jax.custom_vjp
def sin_sin(x):
    return jnp.sin(jnp.sin(x))


def sin_sin_fwd(x):
    return sin_sin(x), jnp.cos(jnp.sin(x)) * jnp.cos(x)


def sin_sin_bwd(derivative, g):
    return (g * derivative,)


sin_sin.defvjp(sin_sin_fwd, sin_sin_bwd)


def remat_sin_sin(x):
    return sin_sin(x)
