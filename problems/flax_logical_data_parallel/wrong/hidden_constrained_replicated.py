# expect: WRONG_POLICY
# The hidden value and the block's output are constrained with logical names that leave out the
# batch, (None, "length", ...): both are gathered to every device, and each device keeps all B rows
# of the hidden value, 4 times its share. (Constraining the hidden value alone is not enough to
# show it: XLA then re-shards it at the end of the forward program and saves it split.)
import flax.linen as nn
import jax
from jax.ad_checkpoint import checkpoint_name

RULES = (("batch", "data"), ("length", None), ("embed", None), ("mlp", None))


class MLP(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):
        x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
        h = nn.with_logical_constraint(nn.Dense(self.hidden)(x), (None, "length", "mlp"))
        h = checkpoint_name(h, "hidden")
        y = nn.Dense(x.shape[-1])(nn.tanh(h))
        return nn.with_logical_constraint(x + y, (None, "length", "embed"))


RematMLP = nn.remat(MLP, policy=jax.checkpoint_policies.save_only_these_names("hidden"))


def flax_logical_data_parallel(params, x):
    with nn.logical_axis_rules(RULES):
        return RematMLP(hidden=params["Dense_0"]["kernel"].shape[1]).apply({"params": params}, x)
