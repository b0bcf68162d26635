# expect: WRONG_POLICY
# The body gathers inside its checkpoint, but policy=everything_saveable keeps the gathered weight
# of every layer (stacked: [L, d, d] on every device) and the tanh outputs: FSDP's saving is gone.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(h, w_shard):
    w = jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)
    return jnp.tanh(h @ w), None


def fsdp_scan_layers(ws, x):
    body = jax.checkpoint(_layer, policy=jax.checkpoint_policies.everything_saveable)

    def per_device(ws, h):
        return jax.lax.scan(body, h, ws)[0]

    return jax.shard_map(per_device, in_specs=(P(None, "fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
