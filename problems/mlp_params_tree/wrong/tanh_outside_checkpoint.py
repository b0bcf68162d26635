# expect: WRONG_POLICY
# The checkpoint covers the affine map only: each layer keeps its pre-activation's tanh for the
# derivative, outside the checkpoint.
import jax
import jax.numpy as jnp


@jax.checkpoint
def _affine(layer, h):
    return h @ layer["kernel"] + layer["bias"]


def mlp_params_tree(params, x):
    h = x
    for name in ("Dense_0", "Dense_1", "Dense_2"):
        h = jnp.tanh(_affine(params[name], h))
    return h
