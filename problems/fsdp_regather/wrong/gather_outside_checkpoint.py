# expect: WRONG_POLICY
# Gathers each weight BEFORE calling the checkpointed layer: the gathered weight is an input of the
# checkpoint, so it is kept, a full [d_in, d_out] copy per device for every layer.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@jax.checkpoint
def _layer(w, h):
    return jnp.tanh(h @ w)


def _per_device(ws, h):
    for w_shard in ws:
        w = jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)
        h = _layer(w, h)
    return h


def fsdp_regather(ws, x):
    return jax.shard_map(_per_device, in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
