# expect: WRONG_POLICY
# Each layer checkpointed, but under dots_saveable: the matmul outputs are kept too.
import jax
import jax.numpy as jnp


def _dense(layer, h):
    return jnp.tanh(h @ layer["kernel"] + layer["bias"])


def mlp_params_tree(params, x):
    dense = jax.checkpoint(_dense, policy=jax.checkpoint_policies.dots_saveable)
    h = x
    for name in ("Dense_0", "Dense_1", "Dense_2"):
        h = dense(params[name], h)
    return h
