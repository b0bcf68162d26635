# expect: WRONG_ANSWER
# A math slip: cos instead of sin on the second layer.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    def network(W1, W2, x):
        a = checkpoint_name(jnp.sin(x @ W1), "a")
        return jnp.cos(a @ W2)

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="pinned_host")
    return jax.checkpoint(network, policy=policy)(W1, W2, x)
