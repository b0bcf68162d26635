# expect: ACCEPTED
# Style: Flax linen with the remat on the method (nn.remat as a decorator of __call__, under
# @nn.compact), explicit Dense names matching the dict's keys, and the rules passed straight to
# each nn.with_logical_constraint (rules=...) instead of a logical_axis_rules context.
from functools import partial

import flax.linen as nn
import jax
from jax.ad_checkpoint import checkpoint_name

RULES = (("batch", "data"), ("length", None), ("embed", None), ("mlp", None))
constrain = partial(nn.with_logical_constraint, rules=RULES)


class MLP(nn.Module):
    hidden: int

    @partial(nn.remat, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    @nn.compact
    def __call__(self, x):
        x = constrain(x, ("batch", "length", "embed"))
        h = checkpoint_name(constrain(nn.Dense(self.hidden, name="Dense_0")(x), ("batch", "length", "mlp")),
                            "hidden")
        y = nn.Dense(x.shape[-1], name="Dense_1")(nn.tanh(h))
        return constrain(x + y, ("batch", "length", "embed"))


def flax_logical_data_parallel(params, x):
    return MLP(hidden=params["Dense_1"]["kernel"].shape[0]).apply({"params": params}, x)
