# expect: WRONG_ANSWER
# The recursion's base case for two functions applies only one sin: 8 applications instead of 16.
import jax
import jax.numpy as jnp


def _recursive(depth):
    if depth == 1:
        return jnp.sin
    if depth == 2:
        return lambda x: jnp.sin(x)  # should be sin(sin(x))
    first = _recursive(depth // 2)
    second = _recursive(depth - depth // 2)
    return lambda x: second(jax.checkpoint(first)(x))


def sin_chain_recursive(x):
    return _recursive(16)(x)
