# expect: ACCEPTED
# Style: jit (GSPMD) style, no shard_map: a lax.scan over the stacked weights whose body is
# checkpointed and constrains its weight slice replicated with with_sharding_constraint(w, P())
# (the partitioner's all-gather, inside the checkpoint); the carry stays P("fsdp", None).
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(h, w):
    w_full = jax.lax.with_sharding_constraint(w, P())
    h = jax.lax.with_sharding_constraint(h, P("fsdp", None))
    return jax.lax.with_sharding_constraint(jnp.tanh(h @ w_full), P("fsdp", None)), None


def fsdp_scan_layers(ws, x):
    ws = jax.lax.with_sharding_constraint(ws, P(None, "fsdp", None))
    h, _ = jax.lax.scan(jax.checkpoint(_layer), x, ws)
    return h
