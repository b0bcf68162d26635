# Flax linen's own nn.Dropout under nn.remat, handed each layer's key through its rng= argument:
# it then draws bernoulli(k_i, 1 - rate, h.shape) from that very key, the mask the task asks for.
import flax.linen as nn
import jax
import jax.numpy as jnp


class DenseDropout(nn.Module):
    features: int

    @nn.compact
    def __call__(self, h, key):
        h = jnp.tanh(nn.Dense(self.features, name="Dense")(h))
        return nn.Dropout(rate=0.1, deterministic=False)(h, rng=key)


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
