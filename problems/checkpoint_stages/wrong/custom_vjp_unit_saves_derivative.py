# expect: WRONG_POLICY
# Replaces the checkpointed f1-f2 unit by a hand-written VJP that saves the unit's derivative
# d f2(f1(x)) / dx instead of its input x. Counted by shape it looks right (four f32[N] with f3's
# three), but one saved vector is not the value a checkpoint keeps.
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


@jax.custom_vjp
def unit(x):
    return f2(f1(x))


def unit_fwd(x):
    # elementwise, so the JVP along ones is the derivative
    y, derivative = jax.jvp(lambda v: f2(f1(v)), (x,), (jnp.ones_like(x),))
    return y, derivative


def unit_bwd(derivative, g):
    return (g * derivative,)


unit.defvjp(unit_fwd, unit_bwd)


def checkpoint_stages(x):
    return f3(unit(x))
