# expect: ACCEPTED
# Style: plain JAX, jit style: the two Dense layers written out on the dict's arrays, the batch
# kept on "data" with jax.lax.with_sharding_constraint and a bare PartitionSpec, the block under
# jax.checkpoint with save_only_these_names("hidden"). The partitioner inserts the gradients'
# all-reduce over "data".
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P

BATCH = P("data", None, None)


@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def _mlp(params, x):
    x = jax.lax.with_sharding_constraint(x, BATCH)
    h = x @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"]
    h = checkpoint_name(jax.lax.with_sharding_constraint(h, BATCH), "hidden")
    y = jnp.tanh(h) @ params["Dense_1"]["kernel"] + params["Dense_1"]["bias"]
    return jax.lax.with_sharding_constraint(x + y, BATCH)


def flax_logical_data_parallel(params, x):
    return _mlp(params, x)
