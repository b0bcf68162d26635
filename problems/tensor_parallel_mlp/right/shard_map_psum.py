# expect: ACCEPTED
# Style: shard_map with the Megatron pattern written out: the column-parallel matmul on each piece,
# the row-parallel partial sums completed by one psum over `model`; jax.checkpoint inside the body.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _mlp_shard(x, w1, w2):
    # on each device: x f32[B/2, d], w1 f32[d, h/2], w2 f32[h/2, d]
    u = checkpoint_name(x @ w1, "hidden")              # column parallel: no communication
    partial = jnp.tanh(u) @ w2                         # row parallel: a partial sum over `model`
    return x + jax.lax.psum(partial, "model")          # the one all-reduce


def tensor_parallel_mlp(x, w1, w2):
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    mlp = jax.shard_map(
        jax.checkpoint(_mlp_shard, policy=policy),
        in_specs=(P("data", None), P(None, "model"), P("model", None)),
        out_specs=P("data", None))
    return mlp(x, w1, w2)
