# expect: WRONG_POLICY
# nn.remat with policy=everything_saveable: every intermediate may be saved, so nothing is
# recomputed and the residuals are those of no remat at all.
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


RematMLP = nn.remat(MLP, policy=jax.checkpoint_policies.everything_saveable)


def flax_logical_data_parallel(params, x):
    with nn.logical_axis_rules(RULES):
        return RematMLP(hidden=params["Dense_0"]["kernel"].shape[1]).apply({"params": params}, x)
