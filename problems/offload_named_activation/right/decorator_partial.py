# expect: ACCEPTED
# The decorator form, with the policy built once at module level and the names as a tuple.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

OFFLOAD_A = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=(), names_which_can_be_offloaded=("a",),
    offload_src="device", offload_dst="pinned_host")


@partial(jax.checkpoint, policy=OFFLOAD_A)
def offload_named_activation(W1, W2, x):
    a = checkpoint_name(jnp.sin(jnp.dot(x, W1)), name="a")
    return jnp.sin(jnp.dot(a, W2))
