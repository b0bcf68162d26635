# expect: WRONG_ANSWER
# Composes the stages in the wrong order, f1(f2(f3(x))), with a checkpoint around f1 and f2.
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    return jax.checkpoint(lambda v: f1(f2(v)))(f3(x))
