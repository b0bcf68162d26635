"""Reference solution of linen_remat_scan_sqrt. Never served, never mounted into a jail."""

import flax.linen as nn
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a)


def linen_remat_scan_sqrt(params, x):
    outer, inner, _, hidden = params["Dense_0"]["kernel"].shape
    stack = nn.remat_scan(Block, lengths=(outer, inner))(hidden)
    return stack.apply({"params": params}, x)
