# expect: ACCEPTED
# Style: the checkpointed stages listed in a tuple and composed with functools.reduce, wrapped by
# functools.partial(jax.remat, policy=nothing_saveable); the stages are written inline.
from functools import partial, reduce

import jax
import jax.numpy as jnp

CHECKPOINTED = (lambda v: v * jnp.sin(v),          # f1
                lambda v: jnp.exp(jnp.cos(v)))     # f2


def _run(stages, v):
    return reduce(lambda acc, stage: stage(acc), stages, v)


def checkpoint_stages(x):
    unit = partial(jax.remat, policy=jax.checkpoint_policies.nothing_saveable)(
        lambda v: _run(CHECKPOINTED, v))
    return jnp.tanh(unit(x)) ** 2                    # f3, outside any checkpoint
