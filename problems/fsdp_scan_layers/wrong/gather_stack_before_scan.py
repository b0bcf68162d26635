# expect: WRONG_POLICY
# Gathers the WHOLE weight stack once, before the scan, and scans the checkpointed layer over the
# gathered [L, d, d]: the scan's residuals include every full weight, [L, d, d] on every device.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@jax.checkpoint
def _layer(h, w):
    return jnp.tanh(h @ w), None


def _per_device(ws, h):
    full = jax.lax.all_gather(ws, "fsdp", axis=1, tiled=True)  # [L, d, d]
    return jax.lax.scan(_layer, h, full)[0]


def fsdp_scan_layers(ws, x):
    return jax.shard_map(_per_device, in_specs=(P(None, "fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
