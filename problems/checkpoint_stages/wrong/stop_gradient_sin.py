# expect: WRONG_GRADIENT
# The value is right, but sin(x) in f1 is behind stop_gradient, so the gradient drops its cos(x) * x term.
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    def first_two(v):
        return f2(jax.lax.stop_gradient(jnp.sin(v)) * v)

    return f3(jax.checkpoint(first_two)(x))
