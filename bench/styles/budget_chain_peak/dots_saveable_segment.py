# expect: WRONG_POLICY
# each pair but the last under dots_saveable keeps both products: over the peak budget (held out: written apart from the package)
import jax
import jax.numpy as jnp


def _pair(w1, w2, h):
    return jnp.tanh(jnp.tanh(h @ w1) @ w2)


_pair_ck = jax.checkpoint(_pair, policy=jax.checkpoint_policies.dots_saveable)


def chain_peak(ws, x):
    h = x
    for i in range(0, len(ws) - 2, 2):
        h = _pair_ck(ws[i], ws[i + 1], h)
    for w in ws[-2:]:
        h = jnp.tanh(h @ w)
    return h
