# expect: WRONG_POLICY
# save_only_these_names("hidden"): the right value, sharded the right way, but kept in device
# memory between the passes instead of pinned host memory.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def _layer(x, w):
    w_in, w_out = w
    h = jax.lax.with_sharding_constraint(jnp.einsum("btd,df->btf", x, w_in), P("data", None, "model"))
    h = checkpoint_name(h, "hidden")
    y = jnp.einsum("btf,fd->btd", jax.nn.relu(h), w_out)
    return jax.lax.with_sharding_constraint(x + y, P("data", None, None)), None


def offload_scan_mesh(w_in, w_out, x):
    x, _ = jax.lax.scan(_layer, x, (w_in, w_out))
    return x
