# expect: ACCEPTED
# score: 1.0
# a checkpoint around each pair but the last, its policy keeping the pair's narrow product by name,
# the last pair plain: only the five wide layers before it are rebuilt, one pair at a time
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("narrow"))
def _pair(w_wide, w_narrow, h):
    wide = jnp.tanh(h @ w_wide)
    return jnp.tanh(checkpoint_name(wide @ w_narrow, "narrow"))


def chain_peak(ws, x):
    h = x
    for i in range(0, len(ws) - 2, 2):
        h = _pair(ws[i], ws[i + 1], h)
    for w in ws[-2:]:
        h = jnp.tanh(h @ w)
    return h
