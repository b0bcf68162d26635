# expect: WRONG_POLICY
# Names the gathered weight with checkpoint_name and saves it with save_only_these_names (to avoid
# the second all-gather): every device keeps each full [d_in, d_out] weight until the backward pass.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _layer(w_shard, h):
    w = checkpoint_name(jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True), "gathered_w")
    return jnp.tanh(h @ w)


def fsdp_regather(ws, x):
    layer = jax.checkpoint(_layer, policy=jax.checkpoint_policies.save_only_these_names("gathered_w"))

    def per_device(ws, h):
        for w in ws:
            h = layer(w, h)
        return h

    return jax.shard_map(per_device, in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
