# expect: ACCEPTED
# Style: the scanned stack is a named submodule of an outer Model built inside @nn.compact, with
# nn.checkpoint (the other name of nn.remat) and an explicit nothing_saveable policy; the
# parameters are nested under the submodule's name before apply.
import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        z = nn.Dense(self.hidden, name="Dense_0")(h)
        return nn.Dense(h.shape[-1], name="Dense_1")(jnp.tanh(z)) + h, None


class Model(nn.Module):
    hidden: int
    num_layers: int

    @nn.compact
    def __call__(self, x):
        layer = nn.checkpoint(Block, prevent_cse=False,
                              policy=jax.checkpoint_policies.nothing_saveable)
        layers = nn.scan(layer, variable_axes={"params": 0}, split_rngs={"params": True},
                         length=self.num_layers)
        h, _ = layers(self.hidden, name="layers")(x)
        return h


def linen_scan_remat(params, x):
    L, _, f = params["Dense_0"]["kernel"].shape
    return Model(hidden=f, num_layers=L).apply({"params": {"layers": params}}, x)
