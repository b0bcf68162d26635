# expect: WRONG_POLICY
# The shard_map block without jax.checkpoint: the name alone saves nothing in particular, and
# autodiff keeps the layer norm's intermediates, tanh(u) and its derivative on each device.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _body(x, w1, w2):
    mean = x.mean(axis=-1, keepdims=True)
    normed = (x - mean) * jax.lax.rsqrt(jnp.square(x - mean).mean(axis=-1, keepdims=True) + 1e-6)
    return x + jnp.tanh(checkpoint_name(normed @ w1, "hidden")) @ w2


def sequence_parallel_activations(x, w1, w2):
    return jax.shard_map(_body, in_specs=(P(None, "seq", None), P(), P()),
                         out_specs=P(None, "seq", None))(x, w1, w2)
