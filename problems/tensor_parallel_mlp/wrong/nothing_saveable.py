# expect: WRONG_POLICY
# nothing_saveable: only the sharded arguments are kept, so the backward pass recomputes the
# column-parallel matmul x @ W1 before it can differentiate tanh.
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def _body(x, w1, w2):
    return x + jax.lax.psum(jnp.tanh(x @ w1) @ w2, "model")


def tensor_parallel_mlp(x, w1, w2):
    block = jax.checkpoint(_body, policy=jax.checkpoint_policies.nothing_saveable)
    return jax.shard_map(block, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                         out_specs=P("data", None))(x, w1, w2)
