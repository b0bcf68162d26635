# expect: ACCEPTED
# score: 1.0
# the wide pair under a checkpoint whose policy keeps the pair's narrow output product by name, the
# other four layers plain: only layer 1 (x @ W1 and its tanh) is rebuilt
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("narrow"))
def _wide_pair(w1, w2, x):
    wide = jnp.tanh(x @ w1)
    return jnp.tanh(checkpoint_name(wide @ w2, "narrow"))


def chain_peak(ws, x):
    h = _wide_pair(ws[0], ws[1], x)
    for w in ws[2:]:
        h = jnp.tanh(h @ w)
    return h
