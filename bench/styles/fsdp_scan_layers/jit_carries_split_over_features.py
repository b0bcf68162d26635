# expect: WRONG_POLICY
# jit style: the scanned, checkpointed body gathers its weight slice inside (right) but pins its
# output, the next carry, to P(None, "fsdp"): split over features, not the batch. The stacked
# carries are then (L, B, d/4) per device: the same bytes as (L, B/4, d), another piece of them.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(h, w):
    w_full = jax.lax.with_sharding_constraint(w, P())
    h = jax.lax.with_sharding_constraint(h, P(None, "fsdp"))
    return jax.lax.with_sharding_constraint(jnp.tanh(h @ w_full), P(None, "fsdp")), None


def fsdp_scan_layers(ws, x):
    h, _ = jax.lax.scan(jax.checkpoint(_layer), x, ws)
    return jax.lax.with_sharding_constraint(h, P("fsdp", None))
