# expect: WRONG_GRADIENT
# Treats the biases as constants with stop_gradient: the value is right, the gradient for bs is zero.
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def layer(x, W_b):
    W, b = W_b
    return jax.nn.relu(x @ W + jax.lax.stop_gradient(b)), None


def scan_layers_remat(Ws, bs, x):
    x, _ = jax.lax.scan(layer, x, (Ws, bs))
    return x
