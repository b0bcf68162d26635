# expect: WRONG_ANSWER
import jax
import jax.numpy as jnp


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for w in ws:
            h = jax.nn.relu(h @ w)
        return h

    return jax.checkpoint(layers)(ws, x)
