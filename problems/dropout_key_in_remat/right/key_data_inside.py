# The key's raw data goes into the checkpoint and is split and wrapped there: nothing but words
# cross the checkpoint's boundary.
import jax
import jax.numpy as jnp

KEEP = 0.9


def _layer(layer, key_data, index, h):
    key = jax.random.split(jax.random.wrap_key_data(key_data))[index]
    h = jax.nn.tanh(h @ layer["kernel"] + layer["bias"])
    mask = jax.random.bernoulli(key, KEEP, h.shape)
    return jnp.where(mask, h, 0.0) / KEEP


def dropout_key_in_remat(params, dropout_key, x):
    layer = jax.checkpoint(_layer, static_argnums=(2,))
    return layer(params["Dense_1"], dropout_key, 1, layer(params["Dense_0"], dropout_key, 0, x))
