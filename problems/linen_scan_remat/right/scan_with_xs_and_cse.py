# expect: ACCEPTED
# Style: the layer index scanned as an xs input (in_axes=0) and emitted as a per-layer output,
# nn.remat with the default prevent_cse=True, and the variables passed with their collection
# as a FrozenDict. An integer per-layer value is bookkeeping, not a residual.
import flax.linen as nn
import jax.numpy as jnp
from flax.core import freeze


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h, layer_index):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a), layer_index


def linen_scan_remat(params, x):
    L, _, f = params["Dense_0"]["kernel"].shape
    Stack = nn.scan(nn.remat(Block), variable_axes={"params": 0}, split_rngs={"params": True},
                    in_axes=0, length=L)
    h, _ = Stack(f).apply(freeze({"params": params}), x, jnp.arange(L))
    return h
