# expect: ACCEPTED
# score: below 1
# a plain checkpoint around each pair but the last, the last pair run plainly: fits, but rebuilds
# each narrow layer too, whose product the budget would let it keep
# (right/pairs_keep_narrow_product.py)
import jax
import jax.numpy as jnp


@jax.remat
def _pair(w_wide, w_narrow, h):
    return jnp.tanh(jnp.tanh(h @ w_wide) @ w_narrow)


def chain_peak(ws, x):
    h = x
    for i in range(0, len(ws) - 2, 2):
        h = _pair(ws[i], ws[i + 1], h)
    for w in ws[-2:]:
        h = jnp.tanh(h @ w)
    return h
