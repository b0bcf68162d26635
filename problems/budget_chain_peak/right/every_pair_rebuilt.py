# expect: ACCEPTED
# score: below 1
# the uniform recipe: a plain checkpoint around every pair fits, with room to spare, but rebuilds
# all twelve layers
import jax
import jax.numpy as jnp


@jax.checkpoint
def _pair(w_wide, w_narrow, h):
    return jnp.tanh(jnp.tanh(h @ w_wide) @ w_narrow)


def chain_peak(ws, x):
    h = x
    for i in range(0, len(ws), 2):
        h = _pair(ws[i], ws[i + 1], h)
    return h
