# expect: WRONG_POLICY
# The masks are drawn before the checkpoint and passed in: each bool mask is saved for the backward pass.
import jax
import jax.numpy as jnp

KEEP = 0.9


def _dense_dropout(layer, keep, h):
    h = jnp.tanh(h @ layer["kernel"] + layer["bias"])
    return jnp.where(keep, h / KEEP, 0.0)


def dropout_key_in_remat(params, dropout_key, x):
    k0, k1 = jax.random.split(jax.random.wrap_key_data(dropout_key))
    n = x.shape[0]
    keep0 = jax.random.bernoulli(k0, KEEP, (n, params["Dense_0"]["bias"].shape[0]))
    keep1 = jax.random.bernoulli(k1, KEEP, (n, params["Dense_1"]["bias"].shape[0]))
    layer = jax.checkpoint(_dense_dropout)
    return layer(params["Dense_1"], keep1, layer(params["Dense_0"], keep0, x))
