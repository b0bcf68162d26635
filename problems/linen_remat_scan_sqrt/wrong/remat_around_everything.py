# expect: WRONG_POLICY
# nn.remat around the whole nested scan: only the parameters and x are kept, not one carry per
# group; the backward pass replays all L layers at once, keeping all of their values.
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
    Stack = nn.remat(nn.remat_scan(Block, lengths=(a, b)))
    return Stack(f).apply({"params": params}, x)
