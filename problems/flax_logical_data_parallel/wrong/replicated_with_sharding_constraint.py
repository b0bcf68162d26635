# expect: WRONG_POLICY
# jit style with bare PartitionSpecs, but P() (replicated) for the hidden value and the output:
# the policy is right, yet every device keeps the whole f32[B, T, h] hidden value instead of its
# B/4 rows.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def _mlp(params, x):
    h = x @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"]
    h = checkpoint_name(jax.lax.with_sharding_constraint(h, P()), "hidden")
    y = jnp.tanh(h) @ params["Dense_1"]["kernel"] + params["Dense_1"]["bias"]
    return jax.lax.with_sharding_constraint(x + y, P())


def flax_logical_data_parallel(params, x):
    return _mlp(params, x)
