# expect: WRONG_POLICY
# Right math, no jax.checkpoint: every stage keeps its own residuals (8 x f32[N] instead of 4).
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    return f3(f2(f1(x)))
