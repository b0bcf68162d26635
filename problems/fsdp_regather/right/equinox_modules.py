# expect: ACCEPTED
# Style: Equinox: one eqx.Module per layer holding that device's weight shard, its __call__
# gathering the weight (jax.lax.all_gather) and wrapped in eqx.filter_checkpoint; the layers are
# built from the shards inside jax.shard_map.
import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


class ShardedDense(eqx.Module):
    w_shard: jax.Array  # this device's rows of the [d_in, d_out] weight

    @eqx.filter_checkpoint
    def __call__(self, h):
        w = jax.lax.all_gather(self.w_shard, "fsdp", axis=0, tiled=True)
        return jnp.tanh(jnp.einsum("bi,io->bo", h, w))


def fsdp_regather(ws, x):
    def per_device(ws, h):
        for layer in [ShardedDense(w) for w in ws]:
            h = layer(h)
        return h

    return jax.shard_map(per_device, in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
