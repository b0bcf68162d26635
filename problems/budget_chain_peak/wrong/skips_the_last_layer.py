# expect: WRONG_ANSWER
# the reference's schedule, but the loop stops one layer short
import jax
import jax.numpy as jnp


def chain_peak(ws, x):
    pair = jax.checkpoint(lambda w1, w2, h: jnp.tanh(jnp.tanh(h @ w1) @ w2))
    h = x
    for i in range(0, len(ws) - 2, 2):
        h = pair(ws[i], ws[i + 1], h)
    for w in ws[-2:-1]:
        h = jnp.tanh(h @ w)
    return h
