# expect: WRONG_POLICY
# Unrolls the layers in a Python loop (checkpointed, right policy) instead of scanning: much the
# same values are saved, but as separate per-layer arrays instead of stacked over L.
import jax
import jax.numpy as jnp


def scan_layers_remat(Ws, bs, x):
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    layer = jax.checkpoint(lambda x, W, b: jax.nn.relu(x @ W + b), policy=policy)
    for l in range(Ws.shape[0]):
        x = layer(x, Ws[l], bs[l])
    return x
