# expect: ACCEPTED
# Style: nn.remat as a decorator on the compact __call__ (functools.partial with static_argnums=(2,)
# and the named policy), the name written as a string constant.
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

PRE = "dense0_out"


class Block(nn.Module):
    hidden: int

    @partial(
        nn.remat,
        static_argnums=(2,),
        policy=jax.checkpoint_policies.save_only_these_names(PRE),
    )
    @nn.compact
    def __call__(self, x, train):
        z = nn.Dense(self.hidden)(x)
        z = checkpoint_name(z, PRE)
        a = jnp.tanh(z) + 0.1 * z if train else jnp.tanh(z)
        return x + nn.Dense(x.shape[-1])(a)


def linen_remat_train_flag(params, x, train):
    return Block(params["Dense_0"]["kernel"].shape[1]).apply({"params": params}, x, train)
