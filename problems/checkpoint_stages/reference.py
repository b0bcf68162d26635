"""Reference solution of checkpoint_stages. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    first_two = jax.checkpoint(lambda v: f2(f1(v)))
    return f3(first_two(x))
