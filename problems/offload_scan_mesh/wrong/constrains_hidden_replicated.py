# expect: WRONG_POLICY
# jit-style, but the hidden value is constrained to P("data", None, None) before it is named (the
# "model" axis left out): each device offloads a [L, B/2, T, f] block, its two "model" pieces
# together, twice what the policy offloads; the host copy is replicated over "model".
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["hidden"],
    offload_src="device", offload_dst="pinned_host")


@partial(jax.checkpoint, policy=POLICY)
def _layer(x, w):
    w_in, w_out = w
    h = jax.lax.with_sharding_constraint(jnp.einsum("btd,df->btf", x, w_in), P("data", None, None))
    h = checkpoint_name(h, "hidden")
    y = jnp.einsum("btf,fd->btd", jax.nn.relu(h), w_out)
    return jax.lax.with_sharding_constraint(x + y, P("data", None, None)), None


def offload_scan_mesh(w_in, w_out, x):
    x, _ = jax.lax.scan(_layer, x, (w_in, w_out))
    return x
