# expect: WRONG_POLICY
# The first attempt of jax-ml/jax #23869: the block's output (the scan carry) is named and offloaded
# instead of the hidden value. The body's backward pass never needs its own output, so nothing goes
# to the host: each layer keeps its input carry on the device and recomputes the rest.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["output"],
    offload_src="device", offload_dst="pinned_host")


@partial(jax.checkpoint, policy=POLICY)
def _layer(x, w):
    w_in, w_out = w
    h = jax.lax.with_sharding_constraint(jnp.einsum("btd,df->btf", x, w_in), P("data", None, "model"))
    y = jnp.einsum("btf,fd->btd", jax.nn.relu(h), w_out)
    out = jax.lax.with_sharding_constraint(x + y, P("data", None, None))
    return checkpoint_name(out, "output"), None


def offload_scan_mesh(w_in, w_out, x):
    x, _ = jax.lax.scan(_layer, x, (w_in, w_out))
    return x
