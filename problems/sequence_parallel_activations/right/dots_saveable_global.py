# expect: ACCEPTED
# Style: plain global code with no sharding annotation under jax.remat(dots_saveable): the only dot
# the backward pass needs is LN(x) @ W1 (the layer norm has none), and the partitioner propagates
# x's split over the sequence to it.
from functools import partial

import jax
import jax.numpy as jnp


def _layer_norm(x, eps=1e-6):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(jnp.var(x, axis=-1, keepdims=True) + eps)


@partial(jax.remat, policy=jax.checkpoint_policies.dots_saveable)
def sequence_parallel_activations(x, w1, w2):
    return x + jnp.tanh(jnp.einsum("btd,dh->bth", _layer_norm(x), w1)) @ w2
