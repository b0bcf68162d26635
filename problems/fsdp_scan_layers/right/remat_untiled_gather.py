# expect: ACCEPTED
# Style: the jax.remat alias with policy=nothing_saveable as a decorator on the layer, an untiled
# all_gather ([4, d/4, d]) merged by a reshape, jnp.dot, and jax.shard_map applied as a decorator
# through functools.partial around the scan.
import functools

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@functools.partial(jax.remat, policy=jax.checkpoint_policies.nothing_saveable)
def _apply(h, w_shard):
    w = jax.lax.all_gather(w_shard, "fsdp").reshape(-1, w_shard.shape[-1])
    return jnp.tanh(jnp.dot(h, w))


@functools.partial(jax.shard_map, in_specs=(P(None, "fsdp", None), P("fsdp", None)), out_specs=P("fsdp", None))
def _per_device(ws, x):
    def body(h, w_shard):
        return _apply(h, w_shard), None

    h, _ = jax.lax.scan(body, x, ws)
    return h


def fsdp_scan_layers(ws, x):
    return _per_device(ws, x)
