# expect: WRONG_POLICY
# Plain FSDP with no jax.checkpoint: autodiff keeps every gathered weight (for the cotangent of h)
# and every tanh output, on every device.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _per_device(ws, h):
    for w_shard in ws:
        h = jnp.tanh(h @ jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True))
    return h


def fsdp_regather(ws, x):
    return jax.shard_map(_per_device, in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
