# expect: WRONG_POLICY
# Checkpoints the whole function, f3 included: only x is saved (1 x f32[N] instead of 4).
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    return jax.checkpoint(lambda v: f3(f2(f1(v))))(x)
