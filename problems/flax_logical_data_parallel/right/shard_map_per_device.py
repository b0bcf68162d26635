# expect: ACCEPTED
# Style: jax.shard_map: each device runs the checkpointed MLP on its own B/4 batch rows with the
# whole (replicated, P()) parameter dict. The forward pass needs no collective; the weight
# gradients, unvarying over "data", are summed over the devices by the psum that autodiff puts in
# the transpose of shard_map.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _dense(p, x):
    return jnp.einsum("btd,dh->bth", x, p["kernel"]) + p["bias"]


@partial(jax.shard_map, in_specs=(P(), P("data")), out_specs=P("data"))
def flax_logical_data_parallel(params, x):
    def block(params, x):                          # x: [B/4, T, d] on this device
        h = checkpoint_name(_dense(params["Dense_0"], x), "hidden")
        return x + _dense(params["Dense_1"], jnp.tanh(h))

    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    return jax.checkpoint(block, policy=policy)(params, x)
