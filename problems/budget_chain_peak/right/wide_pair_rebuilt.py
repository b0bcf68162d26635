# expect: ACCEPTED
# score: below 1
# only the wide pair (layers 1 and 2) under a checkpoint; layers 3 to 6 run plainly, so their
# values are kept and their backward pass runs before the pair is rebuilt; it rebuilds layer 2 too,
# whose narrow product the budget would let it keep (right/pair_keeps_narrow_product.py)
import jax
import jax.numpy as jnp


@jax.remat
def _wide_pair(w1, w2, x):
    return jnp.tanh(jnp.tanh(x @ w1) @ w2)


def chain_peak(ws, x):
    h = _wide_pair(ws[0], ws[1], x)
    for w in ws[2:]:
        h = jnp.tanh(h @ w)
    return h
