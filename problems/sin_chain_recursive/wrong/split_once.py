# expect: WRONG_POLICY
# Splits the chain once and stops: the checkpointed first half costs only x, but the plain
# second half still saves 8 cosines.
import jax
import jax.numpy as jnp


def _chain(x, depth):
    for _ in range(depth):
        x = jnp.sin(x)
    return x


def sin_chain_recursive(x):
    h = jax.checkpoint(lambda x: _chain(x, 8))(x)
    return _chain(h, 8)
