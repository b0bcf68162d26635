# expect: ACCEPTED
from functools import partial

import jax
import jax.numpy as jnp


def scan_layers_remat(Ws, bs, x):
    @partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def body(x, l):
        return jax.nn.relu(x @ Ws[l] + bs[l]), None

    x, _ = jax.lax.scan(body, x, jnp.arange(Ws.shape[0]))
    return x
