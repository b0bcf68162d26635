# expect: RUNTIME_ERROR
# static_argnums=(1,) as for a plain function: linen counts `self` as argument 0, so this marks
# x static and `train` stays a tracer; `if train:` raises TracerBoolConversionError.
import flax.linen as nn
import jax
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
    policy = jax.checkpoint_policies.save_only_these_names("pre")
    block = nn.remat(Block, static_argnums=(1,), policy=policy)(params["Dense_0"]["kernel"].shape[1])
    return block.apply({"params": params}, x, train)
