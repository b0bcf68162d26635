# expect: WRONG_ANSWER
# Flax linen's nn.Dropout under nn.remat with no rng= argument, the 'dropout' stream seeded with the
# given key: the policy is right (the key is kept, the mask drawn again), but nn.Dropout draws from
# a key Flax derives from that stream and the module's path (make_rng), not from k_i: other masks.
import flax.linen as nn
import jax
import jax.numpy as jnp


class DenseDropout(nn.Module):
    features: int

    @nn.compact
    def __call__(self, h):
        h = jnp.tanh(nn.Dense(self.features, name="Dense")(h))
        return nn.Dropout(rate=0.1, deterministic=False)(h)


class TwoLayers(nn.Module):
    widths: tuple

    @nn.compact
    def __call__(self, x):
        Block = nn.remat(DenseDropout)
        h = Block(self.widths[0], name="Dense_0")(x)
        return Block(self.widths[1], name="Dense_1")(h)


def dropout_key_in_remat(params, dropout_key, x):
    widths = (params["Dense_0"]["bias"].shape[0], params["Dense_1"]["bias"].shape[0])
    variables = {"params": {name: {"Dense": layer} for name, layer in params.items()}}
    key = jax.random.wrap_key_data(dropout_key)
    return TwoLayers(widths).apply(variables, x, rngs={"dropout": key})
