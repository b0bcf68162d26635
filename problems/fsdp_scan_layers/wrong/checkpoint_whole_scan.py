# expect: WRONG_POLICY
# jax.checkpoint around the whole scan instead of its body: only the weight shards and x are kept,
# no carries, and the backward pass re-runs the whole forward scan (a different trade-off).
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(h, w_shard):
    return jnp.tanh(h @ jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)), None


@jax.checkpoint
def _network(ws, h):
    return jax.lax.scan(_layer, h, ws)[0]


def fsdp_scan_layers(ws, x):
    return jax.shard_map(_network, in_specs=(P(None, "fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
