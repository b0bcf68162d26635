# expect: WRONG_POLICY
# autodiff keeps every layer's output: far over the budget
import jax.numpy as jnp


def uneven_chain(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return h
