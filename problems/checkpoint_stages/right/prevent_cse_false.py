# expect: ACCEPTED
# Style: jax.checkpoint with prevent_cse=False (allowed outside scan/loops), called on a lambda
# that applies f1 then f2 in two statements.
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def _unit(v):
    u = f1(v)
    return f2(u)


def checkpoint_stages(x):
    h = jax.checkpoint(_unit, prevent_cse=False)(x)
    return f3(h)
