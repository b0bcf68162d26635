# expect: WRONG_POLICY
# Gathers inside the checkpoint but with policy=everything_saveable: each layer keeps its gathered
# weight, a full [d_in, d_out] copy on every device (and its tanh output), the memory FSDP avoids.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(w_shard, x):
    w = jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)
    return jnp.tanh(x @ w)


def fsdp_regather(ws, x):
    layer = jax.checkpoint(_layer, policy=jax.checkpoint_policies.everything_saveable)

    def network(ws, x):
        for w in ws:
            x = layer(w, x)
        return x

    return jax.shard_map(network, in_specs=(P("fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
