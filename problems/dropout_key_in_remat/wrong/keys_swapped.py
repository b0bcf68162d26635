# expect: WRONG_ANSWER
# The first layer draws its mask from the second key: other masks, other values.
import jax
import jax.numpy as jnp

KEEP = 0.9


def _dense_dropout(layer, key, h):
    h = jnp.tanh(h @ layer["kernel"] + layer["bias"])
    return jnp.where(jax.random.bernoulli(key, KEEP, h.shape), h / KEEP, 0.0)


def dropout_key_in_remat(params, dropout_key, x):
    k0, k1 = jax.random.split(jax.random.wrap_key_data(dropout_key))
    layer = jax.checkpoint(_dense_dropout)
    return layer(params["Dense_1"], k0, layer(params["Dense_0"], k1, x))
