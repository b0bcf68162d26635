# Each layer a checkpointed closure over its typed key: the key is saved (as its two words), the
# mask is drawn again in the backward pass.
import jax
import jax.numpy as jnp

KEEP = 0.9


def dropout_key_in_remat(params, dropout_key, x):
    keys = jax.random.split(jax.random.wrap_key_data(dropout_key), 2)
    h = x
    for i in range(2):
        layer = params[f"Dense_{i}"]

        @jax.checkpoint
        def step(kernel, bias, key, h):
            h = jnp.tanh(jnp.einsum("nd,dh->nh", h, kernel) + bias)
            return jnp.where(jax.random.bernoulli(key, KEEP, h.shape), h / KEEP, 0.0)

        h = step(layer["kernel"], layer["bias"], keys[i], h)
    return h
