# expect: ACCEPTED
# score: 1.0
# each pair but the last checkpointed, its narrow product kept by name, the last pair plain (held out: written apart from the package)
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _pair(w1, w2, x):
    a = jnp.tanh(x @ w1)
    return jnp.tanh(checkpoint_name(a @ w2, "z2"))


_pair_ck = jax.checkpoint(_pair, policy=jax.checkpoint_policies.save_only_these_names("z2"))


def chain_peak(ws, x):
    h = x
    for i in range(0, len(ws) - 2, 2):
        h = _pair_ck(ws[i], ws[i + 1], h)
    for w in ws[-2:]:
        h = jnp.tanh(h @ w)
    return h
