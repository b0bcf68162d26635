# expect: WRONG_POLICY
# Offloads `a` with offload_dst="unpinned_host". JAX 0.10.2 maps only "pinned_host" to host
# memory (jax/_src/core.py, mem_kind_to_space), so the exported program keeps `a` in device
# memory: the same value as the policy's, in the wrong place. The message says so.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    def network(W1, W2, x):
        a = checkpoint_name(jnp.sin(x @ W1), "a")
        return jnp.sin(a @ W2)

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="unpinned_host")
    return jax.checkpoint(network, policy=policy)(W1, W2, x)
