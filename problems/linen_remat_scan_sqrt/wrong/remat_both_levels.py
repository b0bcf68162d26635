# expect: WRONG_POLICY
# The layers inside each group are rematerialized too: the same residuals as the reference (the
# parameters and one carry per group), but the backward pass replays each group's forward scan
# and then every layer once more: about twice the reference's recomputation.
import flax.linen as nn
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a), None


def _scan(target, length):
    return nn.scan(target, variable_axes={"params": 0}, split_rngs={"params": True},
                   length=length)


def linen_remat_scan_sqrt(params, x):
    a, b, _, f = params["Dense_0"]["kernel"].shape
    Group = _scan(nn.remat(Block, prevent_cse=False), b)
    Stack = _scan(nn.remat(Group, prevent_cse=False), a)
    h, _ = Stack(f).apply({"params": params}, x)
    return h
