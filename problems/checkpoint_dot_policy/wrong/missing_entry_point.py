# expect: COMPILE_ERROR
# The function has the wrong name.
import jax.numpy as jnp


def checkpoint_dot(w1, w2, x):
    return jnp.sum(x)
