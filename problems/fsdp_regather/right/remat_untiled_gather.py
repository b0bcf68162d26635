# expect: ACCEPTED
# Style: jax.remat alias with policy=nothing_saveable as a decorator, an untiled all_gather
# ([4, rows, d_out]) merged by a reshape, and shard_map applied as a decorator through
# functools.partial, the layers folded with functools.reduce.
import functools

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@functools.partial(jax.remat, policy=jax.checkpoint_policies.nothing_saveable)
def _layer(h, w_shard):
    blocks = jax.lax.all_gather(w_shard, "fsdp")  # [n, rows, d_out]
    w = blocks.reshape(-1, w_shard.shape[1])
    return jnp.tanh(jax.lax.dot_general(h, w, (((1,), (0,)), ((), ()))))


@functools.partial(jax.shard_map, in_specs=(P("fsdp", None), P("fsdp", None)), out_specs=P("fsdp", None))
def _per_device(ws, x):
    return functools.reduce(_layer, ws, x)


def fsdp_regather(ws, x):
    return _per_device(ws, x)
