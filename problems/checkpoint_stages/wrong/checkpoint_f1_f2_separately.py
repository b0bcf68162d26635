# expect: WRONG_POLICY
# Checkpoints f1 and f2 as two separate units: f1's output is saved at the boundary between them
# (5 x f32[N]).
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    return f3(jax.checkpoint(f2)(jax.checkpoint(f1)(x)))
