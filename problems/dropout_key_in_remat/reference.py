"""Reference solution of dropout_key_in_remat. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp

KEEP = 0.9  # dropout rate 0.1


def _dense_dropout(layer, key, h):
    h = jnp.tanh(h @ layer["kernel"] + layer["bias"])
    keep = jax.random.bernoulli(key, KEEP, h.shape)
    return jnp.where(keep, h / KEEP, 0.0)


def dropout_key_in_remat(params, dropout_key, x):
    k0, k1 = jax.random.split(jax.random.wrap_key_data(dropout_key))
    layer = jax.checkpoint(_dense_dropout)
    h = layer(params["Dense_0"], k0, x)
    return layer(params["Dense_1"], k1, h)
