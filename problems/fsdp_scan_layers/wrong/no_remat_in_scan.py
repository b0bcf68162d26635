# expect: WRONG_POLICY
# The scan body has no jax.checkpoint: each step keeps its gathered weight (for the cotangent of h)
# and its tanh output, stacked over the L steps on every device.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(h, w_shard):
    return jnp.tanh(h @ jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)), None


def fsdp_scan_layers(ws, x):
    def per_device(ws, h):
        return jax.lax.scan(_layer, h, ws)[0]

    return jax.shard_map(per_device, in_specs=(P(None, "fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
