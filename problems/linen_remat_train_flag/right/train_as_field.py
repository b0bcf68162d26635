# expect: ACCEPTED
# Style: the flag as a module field (the linen `deterministic=` idiom) instead of an argument, so
# nn.checkpoint needs no static_argnums at all: the field is plain Python data of the module.
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


class Block(nn.Module):
    hidden: int
    train: bool

    @nn.compact
    def __call__(self, x):
        z = checkpoint_name(nn.Dense(self.hidden, name="Dense_0")(x), "z")
        a = jnp.tanh(z)
        if self.train:
            a = a + 0.1 * z
        return x + nn.Dense(x.shape[-1], name="Dense_1")(a)


def linen_remat_train_flag(params, x, train):
    policy = jax.checkpoint_policies.save_only_these_names("z")
    block = nn.checkpoint(Block, policy=policy)(hidden=params["Dense_0"]["kernel"].shape[1],
                                               train=bool(train))
    return block.apply({"params": params}, x)
