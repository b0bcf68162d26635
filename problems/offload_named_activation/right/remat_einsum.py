# expect: ACCEPTED
# jax.remat (the alias of jax.checkpoint) around einsums; the same value offloaded.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="pinned_host")

    def layers(W1, W2, x):
        a = checkpoint_name(jnp.sin(jnp.einsum("nd,dh->nh", x, W1)), "a")
        return jnp.sin(jnp.einsum("nh,hk->nk", a, W2))

    return jax.remat(layers, policy=policy)(W1, W2, x)
