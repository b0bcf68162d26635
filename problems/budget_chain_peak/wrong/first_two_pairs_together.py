# expect: WRONG_POLICY
# the reference's schedule with the first two pairs under one checkpoint: its rebuild holds two
# wide layers at once, over the peak budget
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _segment(ws, h):
    for i, w in enumerate(ws):
        h = jnp.tanh(checkpoint_name(h @ w, "narrow") if i % 2 else h @ w)
    return h


_kept = partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("narrow"))(_segment)


def chain_peak(ws, x):
    h = _kept(ws[:4], x)
    for i in range(4, len(ws) - 2, 2):
        h = _kept(ws[i : i + 2], h)
    for w in ws[-2:]:
        h = jnp.tanh(h @ w)
    return h
