# expect: COMPILE_ERROR
# Takes two arguments; the problem passes three.
import jax.numpy as jnp


def checkpoint_dot_policy(w1, x):
    return jnp.sum(x @ w1)
