# expect: ACCEPTED
# Style: functools.partial(jax.checkpoint, policy=nothing_saveable) on a helper that builds the
# constant with a small function of its own (called inside the checkpointed function).
from functools import partial

import jax
import jax.numpy as jnp


def _window(n):
    i = jnp.arange(n, dtype=jnp.float32)
    s = jnp.sin(i)
    return s * s


@partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
def _scaled(x):
    return _window(x.shape[0]) * x


def remat_constant(x):
    return _scaled(x)
