# expect: WRONG_POLICY
# a checkpoint around every layer: twelve carries, six of them wide, held through the backward
# pass; over the peak budget
import jax
import jax.numpy as jnp


def chain_peak(ws, x):
    layer = jax.checkpoint(lambda w, h: jnp.tanh(h @ w))
    h = x
    for w in ws:
        h = layer(w, h)
    return h
