# expect: WRONG_POLICY
# No nn.remat: autodiff keeps tanh's output, its derivative 1 - tanh^2 and, in training, the
# leaky sum, instead of the one named pre-activation.
import flax.linen as nn
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
    return Block(params["Dense_0"]["kernel"].shape[1]).apply({"params": params}, x, train)
