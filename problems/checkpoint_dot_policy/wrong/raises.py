# expect: RUNTIME_ERROR
# Raises while being traced.
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    if x.shape[0] > 0:
        raise ValueError("not implemented yet")
    return jnp.sum(x)
