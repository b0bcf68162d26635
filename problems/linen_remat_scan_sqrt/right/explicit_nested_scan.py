# expect: ACCEPTED
# Style: what nn.remat_scan builds, written out in linen: an outer nn.scan over nn.remat(Group),
# where Group runs an inner nn.scan (no remat) over b blocks. Parameters of the inner scan sit
# directly under the group (no extra name level), so the [a, b, ...] tree applies as it is.
import flax.linen as nn
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h, _=None):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a), None


def _scan(target, length):
    return nn.scan(target, variable_axes={"params": 0}, split_rngs={"params": True},
                   length=length)


def linen_remat_scan_sqrt(params, x):
    outer, inner, _, hidden = params["Dense_0"]["kernel"].shape
    Group = _scan(Block, inner)
    Stack = _scan(nn.remat(Group, prevent_cse=False), outer)
    h, _ = Stack(hidden).apply({"params": params}, x)
    return h
