# expect: WRONG_POLICY
# shard_map that all_gathers the hidden value over "model" and names the gathered copy (each device
# then multiplies its own columns of it by its rows of w_out and psums): each device offloads the
# whole [B/2, T, f] row block, twice its [B/2, T, f/2] piece, the host copy replicated over "model".
from functools import partial

import jax
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["hidden"],
    offload_src="device", offload_dst="pinned_host")


def _local_layer(x, w):
    w_in, w_out = w                                                    # [d, f/2], [f/2, d]
    h = jax.lax.all_gather(x @ w_in, "model", axis=2, tiled=True)      # [B/2, T, f]
    h = checkpoint_name(h, "hidden")
    cols = w_out.shape[0]
    mine = jax.lax.dynamic_slice_in_dim(jax.nn.relu(h), jax.lax.axis_index("model") * cols, cols, axis=2)
    return x + jax.lax.psum(mine @ w_out, "model"), None


@partial(jax.shard_map, in_specs=(P(None, None, "model"), P(None, "model", None), P("data")),
         out_specs=P("data"))
def offload_scan_mesh(w_in, w_out, x):
    x, _ = jax.lax.scan(jax.checkpoint(_local_layer, policy=POLICY), x, (w_in, w_out))
    return x
