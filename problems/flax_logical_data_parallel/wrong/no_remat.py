# expect: WRONG_POLICY
# The name and the constraints without nn.remat: autodiff keeps what the plain MLP needs (tanh of
# the hidden value and its derivative among them), batch-sharded but more than the policy keeps.
import flax.linen as nn
import jax
from jax.ad_checkpoint import checkpoint_name

RULES = (("batch", "data"), ("length", None), ("embed", None), ("mlp", None))


class MLP(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):
        x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
        h = nn.with_logical_constraint(nn.Dense(self.hidden)(x), ("batch", "length", "mlp"))
        h = checkpoint_name(h, "hidden")
        y = nn.Dense(x.shape[-1])(nn.tanh(h))
        return nn.with_logical_constraint(x + y, ("batch", "length", "embed"))


RematMLP = MLP


def flax_logical_data_parallel(params, x):
    with nn.logical_axis_rules(RULES):
        return RematMLP(hidden=params["Dense_0"]["kernel"].shape[1]).apply({"params": params}, x)
