# expect: WRONG_POLICY
# Only the dense layer and tanh are checkpointed; dropout after it keeps its mask and its input.
import jax
import jax.numpy as jnp

KEEP = 0.9


@jax.checkpoint
def _dense(layer, h):
    return jnp.tanh(h @ layer["kernel"] + layer["bias"])


def dropout_key_in_remat(params, dropout_key, x):
    keys = jax.random.split(jax.random.wrap_key_data(dropout_key))
    h = x
    for i, name in enumerate(("Dense_0", "Dense_1")):
        h = _dense(params[name], h)
        h = jnp.where(jax.random.bernoulli(keys[i], KEEP, h.shape), h / KEEP, 0.0)
    return h
