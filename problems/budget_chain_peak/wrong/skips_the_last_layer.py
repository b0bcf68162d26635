# expect: WRONG_ANSWER
# the reference's schedule, but the loop stops one layer short
import jax
import jax.numpy as jnp


def chain_peak(ws, x):
    pair = jax.checkpoint(lambda w1, w2, h: jnp.tanh(jnp.tanh(h @ w1) @ w2))
    h = pair(ws[0], ws[1], x)
    for w in ws[2:-1]:
        h = jnp.tanh(h @ w)
    return h
