"""Reference solution of linen_scan_remat. Never served, never mounted into a jail."""

import flax.linen as nn
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a), None


def linen_scan_remat(params, x):
    num_layers, _, hidden = params["Dense_0"]["kernel"].shape
    stack = nn.scan(
        nn.remat(Block, prevent_cse=False),
        variable_axes={"params": 0},
        split_rngs={"params": True},
        length=num_layers,
    )(hidden)
    h, _ = stack.apply({"params": params}, x)
    return h
