# expect: ACCEPTED
# score: below 1
# layers 1-3 under a checkpoint holding an inner checkpoint over the wide pair; layers 4-6 plain (held out: written apart from the package)
import jax
import jax.numpy as jnp


@jax.checkpoint
def _inner(w1, w2, h):
    return jnp.tanh(jnp.tanh(h @ w1) @ w2)


@jax.checkpoint
def _outer(w1, w2, w3, h):
    return jnp.tanh(_inner(w1, w2, h) @ w3)


def chain_peak(ws, x):
    h = _outer(ws[0], ws[1], ws[2], x)
    for w in ws[3:]:
        h = jnp.tanh(h @ w)
    return h
