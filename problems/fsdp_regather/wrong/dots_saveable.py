# expect: WRONG_POLICY
# The gather is inside the checkpoint, but policy=dots_saveable keeps each layer's matmul output
# x @ W (the pre-activation, [B/4, d_out] per device) besides the layer inputs: three more residuals.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(w_shard, h):
    return jnp.tanh(h @ jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True))


def fsdp_regather(ws, x):
    layer = jax.checkpoint(_layer, policy=jax.checkpoint_policies.dots_saveable)

    def per_device(ws, h):
        for w in ws:
            h = layer(w, h)
        return h

    return jax.shard_map(per_device, in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
