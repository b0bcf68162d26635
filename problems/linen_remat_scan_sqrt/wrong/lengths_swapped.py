# expect: WRONG_ANSWER
# lengths=(b, a) with the parameters reshaped to fit, [b, a, ...]: the same residual shapes when
# a = b, but the layers run in another order, a different function.
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
    swapped = jax.tree.map(lambda p: jnp.swapaxes(p, 0, 1), params)
    return nn.remat_scan(Block, lengths=(b, a))(f).apply({"params": swapped}, x)
