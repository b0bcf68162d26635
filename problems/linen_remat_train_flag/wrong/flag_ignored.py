# expect: WRONG_ANSWER
# Always applies the training formula: right on the training cases, wrong at evaluation.
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):
        z = checkpoint_name(nn.Dense(self.hidden)(x), "pre")
        a = jnp.tanh(z) + 0.1 * z
        return x + nn.Dense(x.shape[-1])(a)


def linen_remat_train_flag(params, x, train):
    policy = jax.checkpoint_policies.save_only_these_names("pre")
    block = nn.remat(Block, policy=policy)(params["Dense_0"]["kernel"].shape[1])
    return block.apply({"params": params}, x)
