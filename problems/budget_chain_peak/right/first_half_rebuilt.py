# expect: ACCEPTED
# score: below 1
# the first three layers under one checkpoint, the last three plain: fits, and rebuilds the narrow
# third layer too, which the budget would have let it keep
import jax
import jax.numpy as jnp


def chain_peak(ws, x):
    def first_half(ws3, h):
        for w in ws3:
            h = jnp.tanh(h @ w)
        return h

    h = jax.checkpoint(first_half)(ws[:3], x)
    for w in ws[3:]:
        h = jnp.tanh(h @ w)
    return h
