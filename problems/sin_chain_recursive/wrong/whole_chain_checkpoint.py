# expect: WRONG_POLICY
# One jax.checkpoint around the whole chain: only x is saved, but the backward pass recomputes
# the chain and holds all 16 cosines at once (its peak is as high as with no checkpoint).
import jax
import jax.numpy as jnp


def sin_chain_recursive(x):
    def chain(x):
        for _ in range(16):
            x = jnp.sin(x)
        return x

    return jax.checkpoint(chain)(x)
