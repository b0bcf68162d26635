# expect: ACCEPTED
# Style: the two-stage unit as a named function decorated with @jax.checkpoint.
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


@jax.checkpoint
def f1_then_f2(x):
    return f2(f1(x))


def checkpoint_stages(x):
    return f3(f1_then_f2(x))
