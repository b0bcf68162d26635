# expect: ACCEPTED
# score: below 1
# the uniform recipe: a checkpoint around every three layers fits, but rebuilds all six layers
import jax
import jax.numpy as jnp


def _run(ws, h):
    for w in ws:
        h = jnp.tanh(h @ w)
    return h


def chain_peak(ws, x):
    h = x
    for start in (0, 3):
        h = jax.checkpoint(_run)(ws[start : start + 3], h)
    return h
