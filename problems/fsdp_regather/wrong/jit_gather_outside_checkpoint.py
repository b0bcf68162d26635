# expect: WRONG_POLICY
# jit style: the weights are constrained replicated (the all-gather) once, before the checkpointed
# layers, so each checkpoint takes a gathered weight as input and keeps it.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@jax.checkpoint
def _layer(w, h):
    return jax.lax.with_sharding_constraint(jnp.tanh(h @ w), P("fsdp", None))


def fsdp_regather(ws, x):
    full = [jax.lax.with_sharding_constraint(w, P()) for w in ws]
    h = x
    for w in full:
        h = _layer(w, h)
    return h
