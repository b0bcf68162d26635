# expect: ACCEPTED
# Style: functools.partial(jax.checkpoint, policy=nothing_saveable) as a reusable wrapper, a
# layer written with lax.dot_general, and the three layers nested in one expression.
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

remat = partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)


def layer(W, v):
    # contract W's input axis (1) with v's only axis (0): the same product as W @ v
    return jnp.sin(lax.dot_general(W, v, (((1,), (0,)), ((), ()))))


def checkpoint_each_layer(W1, W2, W3, x):
    wrapped = remat(layer)
    return wrapped(W3, wrapped(W2, wrapped(W1, x)))
