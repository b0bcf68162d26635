# expect: WRONG_POLICY
# No checkpoint: every layer keeps its tanh output (for the derivative), more than the policy.
import jax.numpy as jnp


def mlp_params_tree(params, x):
    h = x
    for name in ("Dense_0", "Dense_1", "Dense_2"):
        h = jnp.tanh(h @ params[name]["kernel"] + params[name]["bias"])
    return h
