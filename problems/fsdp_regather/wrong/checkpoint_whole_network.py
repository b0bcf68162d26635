# expect: WRONG_POLICY
# One jax.checkpoint around all three layers: only the weight shards and x are kept, and the
# backward pass re-runs the whole network (a different trade-off: no activation shards kept).
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _per_device(ws, h):
    for w_shard in ws:
        h = jnp.tanh(h @ jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True))
    return h


def fsdp_regather(ws, x):
    return jax.shard_map(jax.checkpoint(_per_device), in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
