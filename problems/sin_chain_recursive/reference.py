"""Reference solution of sin_chain_recursive. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp

DEPTH = 16


def _recursive_checkpoint(funs):
    # The jax.checkpoint docs' scheme: split the chain in two, checkpoint the half that runs
    # first, and recurse into both halves.
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        f1, f2 = funs
        return lambda x: f1(f2(x))
    f1 = _recursive_checkpoint(funs[: len(funs) // 2])
    f2 = _recursive_checkpoint(funs[len(funs) // 2:])
    return lambda x: f1(jax.checkpoint(f2)(x))


def sin_chain_recursive(x):
    return _recursive_checkpoint([jnp.sin] * DEPTH)(x)
