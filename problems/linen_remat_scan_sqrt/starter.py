import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    """One layer: h + Dense_1(tanh(Dense_0(h))), returning the new h (the form nn.remat_scan
    wants: carry in, carry out)."""

    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a)


def linen_remat_scan_sqrt(params, x):
    """params: the variables of L = a*b Blocks stacked on two leading axes (group, then layer
    within the group), a dict
        {"Dense_0": {"kernel": float32[a, b, d, f], "bias": float32[a, b, f]},
         "Dense_1": {"kernel": float32[a, b, f, d], "bias": float32[a, b, d]}}
    (the tree nn.remat_scan(Block, lengths=(a, b)) holds); x: float32[N, d].

    Applies the L Blocks in order, layer (i, j) with params[...][i, j], i outer and j inner,
    starting from h = x, and returns the last h, float32[N, d].

    Use nn.remat_scan(Block, lengths=(a, b)), so the VJP keeps the parameters and one input h
    per group of b layers, stacked [a, N, d].
    """
    a, b, _, hidden = params["Dense_0"]["kernel"].shape
    raise NotImplementedError
