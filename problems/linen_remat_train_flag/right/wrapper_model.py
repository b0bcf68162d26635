# expect: ACCEPTED
# Style: the rematted block is a named submodule of an outer Model (as in a real network), so the
# parameters are nested one level deeper under its name before apply.
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x, train: bool):
        z = nn.Dense(self.hidden)(x)
        z = checkpoint_name(z, "mlp_in")
        a = jnp.tanh(z)
        if train:
            a += 0.1 * z
        return nn.Dense(x.shape[-1])(a) + x


class Model(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x, train: bool):
        remat_block = nn.remat(
            Block,
            static_argnums=(2,),
            policy=jax.checkpoint_policies.save_only_these_names("mlp_in"),
        )
        return remat_block(self.hidden, name="block")(x, train)


def linen_remat_train_flag(params, x, train):
    model = Model(hidden=params["Dense_0"]["kernel"].shape[1])
    return model.apply({"params": {"block": params}}, x, train)
