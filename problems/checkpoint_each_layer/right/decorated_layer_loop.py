# expect: ACCEPTED
# Style: a layer function decorated with @jax.checkpoint, applied in a Python loop over the weights.
import jax
import jax.numpy as jnp


@jax.checkpoint
def layer(W, v):
    return jnp.sin(W @ v)


def checkpoint_each_layer(W1, W2, W3, x):
    h = x
    for W in (W1, W2, W3):
        h = layer(W, h)
    return h
