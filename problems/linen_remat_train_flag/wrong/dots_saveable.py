# expect: WRONG_POLICY
# dots_saveable instead of the name: it keeps the matmul output x @ kernel, before the bias is
# added (and the bias, to add it again), not the named pre-activation z.
import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x, train):
        z = nn.Dense(self.hidden)(x)
        a = jnp.tanh(z)
        if train:
            a = a + 0.1 * z
        return x + nn.Dense(x.shape[-1])(a)


def linen_remat_train_flag(params, x, train):
    remat_block = nn.remat(Block, static_argnums=(2,), policy=jax.checkpoint_policies.dots_saveable)
    return remat_block(params["Dense_0"]["kernel"].shape[1]).apply({"params": params}, x, train)
