# expect: WRONG_POLICY
# A Python loop over the layers, each under nn.remat: the same values, but unrolled, as 4 arrays
# per layer (its kernels, first bias and input) instead of 4 stacked over L.
import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a), None


def linen_scan_remat(params, x):
    L, _, f = params["Dense_0"]["kernel"].shape
    layer = nn.remat(Block)(f)
    h = x
    for l in range(L):
        h, _ = layer.apply({"params": jax.tree.map(lambda a: a[l], params)}, h)
    return h
