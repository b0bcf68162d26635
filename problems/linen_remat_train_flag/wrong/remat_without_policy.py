# expect: WRONG_POLICY
# nn.remat with static_argnums right but no policy: the name is there, but the default policy
# saves nothing named, so z is not kept (Dense_0's bias is kept instead, to recompute it).
import flax.linen as nn
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x, train):
        z = checkpoint_name(nn.Dense(self.hidden)(x), "pre")
        a = jnp.tanh(z)
        if train:
            a = a + 0.1 * z
        return x + nn.Dense(x.shape[-1])(a)


def linen_remat_train_flag(params, x, train):
    block = nn.remat(Block, static_argnums=(2,))(params["Dense_0"]["kernel"].shape[1])
    return block.apply({"params": params}, x, train)
