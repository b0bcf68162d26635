# expect: WRONG_POLICY
# A hand-written VJP that saves cos(x) instead of x: one f32[N], the right shape, but not the value
# jax.checkpoint keeps. (Its gradient is right: cos(sin x) is even in sin x, so
# cos(sin x) = cos(sqrt(1 - cos(x)^2)).)
import jax
import jax.numpy as jnp


@jax.custom_vjp
def sin_sin(x):
    return jnp.sin(jnp.sin(x))


def sin_sin_fwd(x):
    return sin_sin(x), jnp.cos(x)


def sin_sin_bwd(c, g):
    abs_sin = jnp.sqrt(jnp.maximum(1.0 - c * c, 0.0))
    return (g * jnp.cos(abs_sin) * c,)


sin_sin.defvjp(sin_sin_fwd, sin_sin_bwd)


def remat_sin_sin(x):
    return sin_sin(x)
