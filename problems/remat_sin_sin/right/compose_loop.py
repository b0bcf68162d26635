# expect: ACCEPTED
# Style: a Python loop composing the two sins inside a lambda, checkpointed in call form.
import jax
import jax.numpy as jnp


def _apply_twice(f, v):
    for _ in range(2):
        v = f(v)
    return v


def remat_sin_sin(x):
    return jax.checkpoint(lambda v: _apply_twice(jnp.sin, v))(x)
