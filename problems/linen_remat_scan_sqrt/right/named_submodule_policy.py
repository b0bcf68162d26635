# expect: ACCEPTED
# Style: nn.remat_scan as a named submodule of an outer Model, with an explicit
# nothing_saveable policy (what it uses when none is given); the parameters are nested under the
# submodule's name.
import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        z = nn.Dense(self.hidden, name="Dense_0")(h)
        return nn.Dense(h.shape[-1], name="Dense_1")(jnp.tanh(z)) + h


class Model(nn.Module):
    hidden: int
    lengths: tuple

    @nn.compact
    def __call__(self, x):
        Stack = nn.remat_scan(Block, lengths=self.lengths,
                              policy=jax.checkpoint_policies.nothing_saveable)
        return Stack(self.hidden, name="blocks")(x)


def linen_remat_scan_sqrt(params, x):
    a, b, _, f = params["Dense_0"]["kernel"].shape
    return Model(hidden=f, lengths=(a, b)).apply({"params": {"blocks": params}}, x)
