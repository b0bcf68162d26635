# expect: ACCEPTED
# Style: Equinox: a stacked eqx.Module (one field holding the [L, d/4, d] shards) split with
# eqx.partition/eqx.combine so lax.scan runs over its array leaves; the per-layer __call__ gathers
# its weight with all_gather and is wrapped in eqx.filter_checkpoint; all inside jax.shard_map.
import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


class ShardedTanhLayer(eqx.Module):
    w_shard: jax.Array  # [d/4, d] on each device (stacked: [L, d/4, d])

    def __call__(self, h):
        w = jax.lax.all_gather(self.w_shard, "fsdp", axis=0, tiled=True)
        return jnp.tanh(jnp.einsum("bi,io->bo", h, w))


def _per_device(ws, x):
    stacked = ShardedTanhLayer(ws)
    params, static = eqx.partition(stacked, eqx.is_array)

    @eqx.filter_checkpoint
    def step(h, layer_params):
        return eqx.combine(layer_params, static)(h), None

    h, _ = jax.lax.scan(step, x, params)
    return h


def fsdp_scan_layers(ws, x):
    return jax.shard_map(_per_device, in_specs=(P(None, "fsdp", None), P("fsdp", None)), out_specs=P("fsdp", None))(ws, x)
