# expect: WRONG_POLICY
# Keeps the four narrow products on the device (as the optimum) AND offloads the two wide ones,
# z0 and z3, to pinned host with save_and_offload_only_these_names. Offloaded bytes count against a
# residual budget (the judge prices recomputation, not transfers): 638,976 + 262,144 bytes in
# `large`, over the 640,000 budget. Before stop 41 this was ACCEPTED with 1.0, a score for free.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=["z1", "z2", "z4", "z5"],
    names_which_can_be_offloaded=["z0", "z3"],
    offload_src="device", offload_dst="pinned_host")


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    return jax.checkpoint(layers, policy=POLICY)(ws, x)
