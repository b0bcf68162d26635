# expect: WRONG_POLICY
# no checkpoint: every layer's values kept, over the peak budget
import jax.numpy as jnp


def chain_peak(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return h
