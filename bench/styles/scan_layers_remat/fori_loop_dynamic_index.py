# expect: ACCEPTED
from functools import partial

import jax


def scan_layers_remat(Ws, bs, x):
    @partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def layer(x, W, b):
        return jax.nn.relu(x @ W + b)

    return jax.lax.fori_loop(0, Ws.shape[0], lambda l, h: layer(h, Ws[l], bs[l]), x)
