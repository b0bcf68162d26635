# expect: WRONG_POLICY
# One checkpoint around both layers: the first layer's output is not kept but recomputed.
import jax
import jax.numpy as jnp

KEEP = 0.9


def _dense_dropout(layer, key, h):
    h = jnp.tanh(h @ layer["kernel"] + layer["bias"])
    return jnp.where(jax.random.bernoulli(key, KEEP, h.shape), h / KEEP, 0.0)


def dropout_key_in_remat(params, dropout_key, x):
    @jax.checkpoint
    def both(params, dropout_key, x):
        k0, k1 = jax.random.split(jax.random.wrap_key_data(dropout_key))
        return _dense_dropout(params["Dense_1"], k1, _dense_dropout(params["Dense_0"], k0, x))

    return both(params, dropout_key, x)
