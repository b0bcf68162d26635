"""Reference solution of scan_layers_remat. Never served, never mounted into a jail."""

from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def _layer(x, W_b):
    W, b = W_b
    return jax.nn.relu(x @ W + b), None


def scan_layers_remat(Ws, bs, x):
    x, _ = jax.lax.scan(_layer, x, (Ws, bs))
    return x
