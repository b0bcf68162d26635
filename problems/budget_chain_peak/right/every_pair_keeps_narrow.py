# expect: ACCEPTED
# score: below 1
# every pair under a checkpoint keeping its narrow product by name, the last pair too: fits, and
# rebuilds the last wide layer as well, which the budget would let it keep
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
    for i in range(0, len(ws), 2):
        h = _pair(ws[i], ws[i + 1], h)
    return h
