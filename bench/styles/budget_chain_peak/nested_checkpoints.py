# expect: ACCEPTED
# score: below 1
# pairs of pairs under an outer checkpoint holding an inner checkpoint over each pair; the last pair plain (held out: written apart from the package)
import jax
import jax.numpy as jnp


@jax.checkpoint
def _inner(w1, w2, h):
    return jnp.tanh(jnp.tanh(h @ w1) @ w2)


@jax.checkpoint
def _outer(w1, w2, w3, w4, h):
    return _inner(w3, w4, _inner(w1, w2, h))


def chain_peak(ws, x):
    h = _outer(*ws[0:4], x)
    h = _outer(*ws[4:8], h)
    h = _inner(ws[8], ws[9], h)
    for w in ws[10:]:
        h = jnp.tanh(h @ w)
    return h
