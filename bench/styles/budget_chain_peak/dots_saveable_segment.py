# expect: WRONG_POLICY
# the wide pair under dots_saveable keeps both products: over the peak budget (held out: written apart from the package)
import jax
import jax.numpy as jnp


def _pair(w1, w2, h):
    return jnp.tanh(jnp.tanh(h @ w1) @ w2)


_pair_ck = jax.checkpoint(_pair, policy=jax.checkpoint_policies.dots_saveable)


def chain_peak(ws, x):
    h = _pair_ck(ws[0], ws[1], x)
    for w in ws[2:]:
        h = jnp.tanh(h @ w)
    return h
