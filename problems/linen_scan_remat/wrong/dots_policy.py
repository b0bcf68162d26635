# expect: WRONG_POLICY
# nn.remat inside the scan, but with dots_saveable: each layer also keeps its first matmul output
# h @ kernel, stacked [L, N, f] (the second matmul's output is not needed, so not kept).
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
    layer = nn.remat(Block, prevent_cse=False, policy=jax.checkpoint_policies.dots_saveable)
    Stack = nn.scan(layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=L)
    h, _ = Stack(f).apply({"params": params}, x)
    return h
