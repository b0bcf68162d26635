# expect: WRONG_POLICY
# jit style: the stacked weights are constrained replicated (P()) before the scan, so the
# checkpointed body receives gathered slices and the scan keeps the whole gathered stack.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@jax.checkpoint
def _layer(h, w):
    return jax.lax.with_sharding_constraint(jnp.tanh(h @ w), P("fsdp", None)), None


def fsdp_scan_layers(ws, x):
    full = jax.lax.with_sharding_constraint(ws, P())
    return jax.lax.scan(_layer, x, full)[0]
