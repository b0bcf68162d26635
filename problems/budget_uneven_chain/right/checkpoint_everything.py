# expect: ACCEPTED
# score: below 1
# one plain checkpoint: only the arguments kept, the whole forward pass recomputed
import jax
import jax.numpy as jnp


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for w in ws:
            h = jnp.tanh(h @ w)
        return h

    return jax.checkpoint(layers)(ws, x)
