# Flax linen: a block whose __call__ takes the key, under nn.remat; the parameters are the ones
# given (apply with {"params": ...}).
import flax.linen as nn
import jax
import jax.numpy as jnp

KEEP = 0.9


class DenseDropout(nn.Module):
    features: int

    @nn.compact
    def __call__(self, h, key):
        h = jnp.tanh(nn.Dense(self.features, name="Dense")(h))
        return jnp.where(jax.random.bernoulli(key, KEEP, h.shape), h / KEEP, 0.0)


class TwoLayers(nn.Module):
    widths: tuple

    @nn.compact
    def __call__(self, x, key):
        k0, k1 = jax.random.split(key)
        Block = nn.remat(DenseDropout)
        h = Block(self.widths[0], name="Dense_0")(x, k0)
        return Block(self.widths[1], name="Dense_1")(h, k1)


def dropout_key_in_remat(params, dropout_key, x):
    widths = (params["Dense_0"]["bias"].shape[0], params["Dense_1"]["bias"].shape[0])
    variables = {"params": {name: {"Dense": layer} for name, layer in params.items()}}
    return TwoLayers(widths).apply(variables, x, jax.random.wrap_key_data(dropout_key))
