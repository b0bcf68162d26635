# expect: WRONG_POLICY
# No checkpoint: every tanh output and mask is kept for the backward pass.
import jax
import jax.numpy as jnp

KEEP = 0.9


def dropout_key_in_remat(params, dropout_key, x):
    keys = jax.random.split(jax.random.wrap_key_data(dropout_key))
    h = x
    for i, name in enumerate(("Dense_0", "Dense_1")):
        h = jnp.tanh(h @ params[name]["kernel"] + params[name]["bias"])
        h = jnp.where(jax.random.bernoulli(keys[i], KEEP, h.shape), h / KEEP, 0.0)
    return h
