# expect: WRONG_POLICY
# Checkpoints the last stage instead of the first two: f1 and f2 keep their residuals (5 x f32[N]).
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    return jax.checkpoint(f3)(f2(f1(x)))
