import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

RULES = (("batch", "data"), ("length", None), ("embed", None), ("mlp", None))


class MLP(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(self.hidden)(x)          # the pre-activation: the value to name "hidden"
        y = nn.Dense(x.shape[-1])(nn.tanh(h))
        return x + y


def flax_logical_data_parallel(params, x):
    """params: the variables of one MLP, a dict
        {"Dense_0": {"kernel": float32[d, h], "bias": float32[h]},
         "Dense_1": {"kernel": float32[h, d], "bias": float32[d]}}, replicated on every device;
    x: float32[B, T, d], split P("data", None, None) on a mesh of 4 devices (data = 4, Auto),
    set while the function is traced.

    Returns float32[B, T, d]: x + Dense_1(tanh(Dense_0(x))).

    Constrain x, the hidden value and the output with nn.with_logical_constraint to
    ("batch", "length", "embed"), ("batch", "length", "mlp"), ("batch", "length", "embed") under
    nn.logical_axis_rules(RULES); name the hidden value "hidden" and apply the module under
    nn.remat with policy=jax.checkpoint_policies.save_only_these_names("hidden"), so each device
    keeps the two kernels and its B/4 rows of x and of "hidden".
    """
    # MLP(hidden=params["Dense_0"]["kernel"].shape[1]).apply({"params": params}, x) computes the
    # right values, with no remat and no constraints.
    raise NotImplementedError
