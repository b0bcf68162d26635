# expect: ACCEPTED
# Style: the four levels of the recursion written out as named functions, with the checkpointed
# halves declared by decorators (@jax.checkpoint, and functools.partial(jax.checkpoint, ...)).
from functools import partial

import jax
import jax.numpy as jnp


def sin2(v):                      # 2 steps, plain
    return jnp.sin(jnp.sin(v))


@jax.checkpoint
def sin2_ckpt(v):                 # the first half of a 4-step segment
    return sin2(v)


def sin4(v):
    return sin2(sin2_ckpt(v))


@partial(jax.checkpoint, prevent_cse=True)
def sin4_ckpt(v):                 # the first half of an 8-step segment
    return sin4(v)


def sin8(v):
    return sin4(sin4_ckpt(v))


@partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
def sin8_ckpt(v):                 # the first half of the 16-step chain
    return sin8(v)


def sin_chain_recursive(x):
    return sin8(sin8_ckpt(x))
