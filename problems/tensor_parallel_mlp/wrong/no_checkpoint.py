# expect: WRONG_POLICY
# The shard_map MLP without jax.checkpoint: autodiff keeps what the plain block needs, tanh(u)
# (the row-parallel matmul's input) and 1 - tanh(u)**2 (its derivative), not the hidden itself.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _body(x, w1, w2):
    u = checkpoint_name(x @ w1, "hidden")
    return x + jax.lax.psum(jnp.tanh(u) @ w2, "model")


def tensor_parallel_mlp(x, w1, w2):
    return jax.shard_map(_body, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                         out_specs=P("data", None))(x, w1, w2)
