# expect: WRONG_ANSWER
# reverse=True scans from the last layer to the first: a different function.
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
    Stack = nn.scan(nn.remat(Block, prevent_cse=False), variable_axes={"params": 0},
                    split_rngs={"params": True}, length=L, reverse=True)
    h, _ = Stack(f).apply({"params": params}, x)
    return h
