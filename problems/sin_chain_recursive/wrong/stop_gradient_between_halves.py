# expect: WRONG_GRADIENT
# "Detaches" the checkpointed half with stop_gradient, as if it were a memory barrier: the value
# is right, but no gradient flows back to x.
import jax
import jax.numpy as jnp


def _recursive(funs):
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        return lambda x: funs[0](funs[1](x))
    first = _recursive(funs[len(funs) // 2:])
    second = _recursive(funs[: len(funs) // 2])
    return lambda x: second(jax.lax.stop_gradient(jax.checkpoint(first)(x)))


def sin_chain_recursive(x):
    return _recursive([jnp.sin] * 16)(x)
