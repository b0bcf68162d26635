# expect: WRONG_POLICY
# the wide products offloaded to unpinned_host, which JAX 0.10.2 keeps in device memory: over the budget
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["z0", "z3"],
        offload_src="device", offload_dst="unpinned_host")
    return jax.checkpoint(layers, policy=policy)(ws, x)
