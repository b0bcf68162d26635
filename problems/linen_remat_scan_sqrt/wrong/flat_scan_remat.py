# expect: WRONG_POLICY
# One flat nn.scan(nn.remat(Block)) over all L = a*b layers, the parameters reshaped to [L, ...]:
# every layer keeps its input, f32[L, N, d] instead of one per group, f32[a, N, d] (and the
# parameters are kept in the reshaped [L, ...] layout).
import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h):
        a = jnp.tanh(nn.Dense(self.hidden)(h))
        return h + nn.Dense(h.shape[-1])(a), None


def linen_remat_scan_sqrt(params, x):
    a, b, _, f = params["Dense_0"]["kernel"].shape
    flat = jax.tree.map(lambda p: p.reshape((a * b,) + p.shape[2:]), params)
    Stack = nn.scan(nn.remat(Block, prevent_cse=False), variable_axes={"params": 0},
                    split_rngs={"params": True}, length=a * b)
    h, _ = Stack(f).apply({"params": flat}, x)
    return h
