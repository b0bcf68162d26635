# expect: WRONG_POLICY
# The same nested scan with no remat at any level: every layer keeps its input, tanh's output and
# its derivative, stacked [a, b, N, ...].
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
    h, _ = _scan(_scan(Block, b), a)(f).apply({"params": params}, x)
    return h
