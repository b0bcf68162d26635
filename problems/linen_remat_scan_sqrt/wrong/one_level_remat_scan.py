# expect: WRONG_POLICY
# nn.remat_scan with a single level, lengths=(L,), over the parameters reshaped to [L, ...]:
# remat_scan rematerializes every level but the innermost, so with one level there is no remat
# at all, and each layer keeps tanh's output and its derivative.
import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a)


def linen_remat_scan_sqrt(params, x):
    a, b, _, f = params["Dense_0"]["kernel"].shape
    flat = jax.tree.map(lambda p: p.reshape((a * b,) + p.shape[2:]), params)
    return nn.remat_scan(Block, lengths=(a * b,))(f).apply({"params": flat}, x)
