# expect: ACCEPTED
# the batch split in two halves along the rows and merged back: the same saved values
from functools import partial

import jax
import jax.numpy as jnp


def scan_layers_remat(Ws, bs, x):
    n = x.shape[0]

    @partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def layer(h, W_b):
        W, b = W_b
        return jax.nn.relu(h @ W + b), None

    h, _ = jax.lax.scan(layer, x, (Ws, bs))
    return h.reshape(n, -1)
