"""Reference solution of mlp_params_tree. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp


def _dense_tanh(layer, h):
    return jnp.tanh(h @ layer["kernel"] + layer["bias"])


def mlp_params_tree(params, x):
    dense = jax.checkpoint(_dense_tanh)
    h = x
    for name in ("Dense_0", "Dense_1", "Dense_2"):
        h = dense(params[name], h)
    return h
