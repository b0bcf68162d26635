# expect: ACCEPTED
# Style: jit style (GSPMD): global arrays, with_sharding_constraint pins the hidden to
# P("data", "model") and the output to P("data", None); the partitioner inserts the all-reduce.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def _mlp(x, w1, w2):
    u = jax.lax.with_sharding_constraint(x @ w1, P("data", "model"))
    u = checkpoint_name(u, "hidden")
    y = x + jnp.tanh(u) @ w2
    return jax.lax.with_sharding_constraint(y, P("data", None))


def tensor_parallel_mlp(x, w1, w2):
    return _mlp(x, w1, w2)
