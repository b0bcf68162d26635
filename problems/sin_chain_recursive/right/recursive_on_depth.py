# expect: ACCEPTED
# Style: recursion on an integer depth instead of a list of functions, with the jax.remat alias.
# Same split as the reference: halves, the half that runs first is checkpointed, pairs plain.
import jax
import jax.numpy as jnp

DEPTH = 16


def sin_n(n):
    """A function applying sin n times (n a power of two), recursively checkpointed."""
    if n == 1:
        return jnp.sin
    if n == 2:
        return lambda v: jnp.sin(jnp.sin(v))
    half = sin_n(n // 2)
    first = jax.remat(half)
    return lambda v: half(first(v))


def sin_chain_recursive(x):
    return sin_n(DEPTH)(x)
