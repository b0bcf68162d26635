# expect: ACCEPTED
# Style: a hand-written FSDP layer as jax.custom_vjp inside jax.shard_map: the forward rule saves
# only the weight shard and the activation shard; the backward rule gathers the weight again,
# recomputes tanh, and reduce-scatters the weight gradient itself with psum_scatter.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _gather(w_shard):
    return jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)


@jax.custom_vjp
def fsdp_dense(w_shard, h):
    return jnp.tanh(h @ _gather(w_shard))


def _fsdp_dense_fwd(w_shard, h):
    return fsdp_dense(w_shard, h), (w_shard, h)


def _fsdp_dense_bwd(res, g):
    w_shard, h = res
    w = _gather(w_shard)                      # second all-gather, in the backward pass
    y = jnp.tanh(h @ w)                       # recomputed from the saved shard
    dz = g * (1.0 - y * y)
    dh = dz @ w.T
    dw_shard = jax.lax.psum_scatter(h.T @ dz, "fsdp", scatter_dimension=0, tiled=True)
    return dw_shard, dh


fsdp_dense.defvjp(_fsdp_dense_fwd, _fsdp_dense_bwd)


def fsdp_regather(ws, x):
    def per_device(ws, h):
        for w_shard in ws:
            h = fsdp_dense(w_shard, h)
        return h

    return jax.shard_map(per_device, in_specs=(P("fsdp", None), P("fsdp", None)),
                         out_specs=P("fsdp", None))(ws, x)
