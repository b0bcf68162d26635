# expect: WRONG_POLICY
# One checkpoint around the whole network: the layer outputs are not kept, only the parameters
# and x; the backward pass recomputes every layer from x.
import jax
import jax.numpy as jnp


@jax.checkpoint
def mlp_params_tree(params, x):
    h = x
    for name in ("Dense_0", "Dense_1", "Dense_2"):
        h = jnp.tanh(h @ params[name]["kernel"] + params[name]["bias"])
    return h
