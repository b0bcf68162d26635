import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


class Block(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x, train):
        z = nn.Dense(self.hidden)(x)          # the pre-activation: the value to name
        a = jnp.tanh(z)
        if train:
            a = a + 0.1 * z                   # a leaky tanh, in training only
        return x + nn.Dense(x.shape[-1])(a)


def linen_remat_train_flag(params, x, train):
    """params: the variables of one Block, a dict
        {"Dense_0": {"kernel": float32[d, h], "bias": float32[h]},
         "Dense_1": {"kernel": float32[h, d], "bias": float32[d]}};
    x: float32[N, d]; train: a Python bool.

    Returns float32[N, d]: x + Dense_1(a), where z = Dense_0(x) and a = tanh(z), plus 0.1 * z
    when train is True.

    Name z with checkpoint_name, and apply Block under nn.remat with the policy
    jax.checkpoint_policies.save_only_these_names(<that name>) and `train` declared static, so
    the VJP keeps the two kernels, x and z, for either flag value.
    """
    block = Block(hidden=params["Dense_0"]["kernel"].shape[1])
    # block.apply({"params": params}, x, train) computes the right values, with no remat.
    raise NotImplementedError
