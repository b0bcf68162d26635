# expect: WRONG_ANSWER
# Applies the layers in the order the dict was written in reverse: a wrong function.
import jax
import jax.numpy as jnp


def mlp_params_tree(params, x):
    dense = jax.checkpoint(lambda p, h: jnp.tanh(h @ p["kernel"] + p["bias"]))
    h = x
    for name in ("Dense_1", "Dense_0"):
        h = dense(params[name], h) if h.shape[-1] == params[name]["kernel"].shape[0] else h
    return dense(params["Dense_2"], h)
