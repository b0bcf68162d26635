# expect: WRONG_POLICY
# The name is on tanh(z), the activation, not on the pre-activation z: same shape, other values
# (and Dense_0's bias is kept too, since z must be recomputed).
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x, train):
        z = nn.Dense(self.hidden)(x)
        a = checkpoint_name(jnp.tanh(z), "pre")
        if train:
            a = a + 0.1 * z
        return x + nn.Dense(x.shape[-1])(a)


def linen_remat_train_flag(params, x, train):
    policy = jax.checkpoint_policies.save_only_these_names("pre")
    block = nn.remat(Block, static_argnums=(2,), policy=policy)(params["Dense_0"]["kernel"].shape[1])
    return block.apply({"params": params}, x, train)
