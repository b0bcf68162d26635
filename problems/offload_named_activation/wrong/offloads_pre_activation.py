# expect: WRONG_POLICY
# Puts the name "a" on x @ W1, before its sin: the offloaded value has the right shape and lands
# on the host, but it is the pre-activation, not a.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    def network(W1, W2, x):
        a = jnp.sin(checkpoint_name(x @ W1, "a"))
        return jnp.sin(a @ W2)

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="pinned_host")
    return jax.checkpoint(network, policy=policy)(W1, W2, x)
