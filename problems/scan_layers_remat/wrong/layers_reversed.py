# expect: WRONG_ANSWER
# scan(..., reverse=True) applies the last layer first.
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def layer(x, W_b):
    W, b = W_b
    return jax.nn.relu(x @ W + b), None


def scan_layers_remat(Ws, bs, x):
    x, _ = jax.lax.scan(layer, x, (Ws, bs), reverse=True)
    return x
