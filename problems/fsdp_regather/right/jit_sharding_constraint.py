# expect: ACCEPTED
# Style: jit (GSPMD) style, no shard_map: inside each checkpointed layer the weight is constrained
# replicated with jax.lax.with_sharding_constraint(w, P()) (the partitioner all-gathers it there) and
# the activations stay constrained to P("fsdp", None); the partitioner inserts every collective.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _layer(w, h):
    w_full = jax.lax.with_sharding_constraint(w, P())  # the all-gather, inside the checkpoint
    h = jax.lax.with_sharding_constraint(h, P("fsdp", None))
    return jax.lax.with_sharding_constraint(jnp.tanh(h @ w_full), P("fsdp", None))


def fsdp_regather(ws, x):
    layer = jax.checkpoint(_layer, policy=jax.checkpoint_policies.nothing_saveable)
    h = x
    for w in ws:
        h = layer(w, h)
    return h
