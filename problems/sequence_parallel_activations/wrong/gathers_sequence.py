# expect: WRONG_POLICY
# Gathers the whole sequence on every device first (the tensor-parallel habit) and runs the block
# on all T tokens: the saved hidden is f32[B, T, h] on each device, 4 times its piece.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _body(x, w1, w2):
    x = jax.lax.all_gather(x, "seq", axis=1, tiled=True)           # f32[B, T, d] everywhere
    mean = x.mean(axis=-1, keepdims=True)
    normed = (x - mean) * jax.lax.rsqrt(jnp.square(x - mean).mean(axis=-1, keepdims=True) + 1e-6)
    u = checkpoint_name(normed @ w1, "hidden")
    return x + jnp.tanh(u) @ w2


def sequence_parallel_activations(x, w1, w2):
    block = jax.checkpoint(_body, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    return jax.shard_map(block, in_specs=(P(None, "seq", None), P(), P()), out_specs=P(),
                         check_vma=False)(x, w1, w2)
