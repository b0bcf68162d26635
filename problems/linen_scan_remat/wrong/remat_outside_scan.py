# expect: WRONG_POLICY
# nn.remat around the whole nn.scan instead of inside it: only the parameters and x are kept, the
# per-layer carries are not (the backward pass replays the whole stack first).
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
    Stack = nn.remat(nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                             length=L))
    h, _ = Stack(f).apply({"params": params}, x)
    return h
