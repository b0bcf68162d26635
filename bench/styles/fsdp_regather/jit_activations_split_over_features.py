# expect: WRONG_POLICY
# jit style, gather inside the checkpointed layer (right), but each layer's output is pinned to
# P(None, "fsdp"): split over its features instead of the batch (a tensor-parallel habit). The
# activation shards a1, a2 that the next layers keep are then (B, h/4) per device, the same bytes
# as (B/4, h) but another piece of the activation: not what FSDP's batch split keeps.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@jax.checkpoint
def _layer(w, h):
    w_full = jax.lax.with_sharding_constraint(w, P())
    return jax.lax.with_sharding_constraint(jnp.tanh(h @ w_full), P(None, "fsdp"))


def fsdp_regather(ws, x):
    h = x
    for w in ws[:-1]:
        h = _layer(w, h)
    last = jax.checkpoint(lambda w, h: jnp.tanh(h @ jax.lax.with_sharding_constraint(w, P())))
    return jax.lax.with_sharding_constraint(last(ws[-1], h), P("fsdp", None))
