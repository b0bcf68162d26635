# expect: ACCEPTED
# Style: jax.shard_map over the whole scan, Megatron-style by hand: each device multiplies its batch
# rows by its weight columns, the second matmul's partial sums are added with an explicit psum over
# "model"; the body is checkpointed with the offloading policy, so each device offloads its own piece.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["hidden"],
    offload_src="device", offload_dst="pinned_host")


def _local_layer(x, w):
    w_in, w_out = w                                   # [d, f/2] and [f/2, d] on this device
    h = checkpoint_name(x @ w_in, "hidden")           # [B/2, T, f/2]: this device's piece
    y = jax.lax.psum(jax.nn.relu(h) @ w_out, "model")  # partial sums over the split f
    return x + y, None


@partial(jax.shard_map, in_specs=(P(None, None, "model"), P(None, "model", None), P("data")),
         out_specs=P("data"))
def _local_network(w_in, w_out, x):
    x, _ = jax.lax.scan(jax.checkpoint(_local_layer, policy=POLICY), x, (w_in, w_out))
    return x


def offload_scan_mesh(w_in, w_out, x):
    return _local_network(w_in, w_out, x)
