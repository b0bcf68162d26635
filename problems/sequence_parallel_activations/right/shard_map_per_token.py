# expect: ACCEPTED
# Style: shard_map over the tokens: each device runs the block on its [B, T/4, d] piece with the
# whole weights (P() in_specs); no collective in the forward pass, and shard_map's transpose
# sums the weight gradients over `seq` (a psum) in the backward pass.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _body(x, w1, w2):                       # x f32[B, T/4, d], w1 f32[d, h], w2 f32[h, d]
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    normed = centred * jax.lax.rsqrt(jnp.square(centred).mean(axis=-1, keepdims=True) + 1e-6)
    u = checkpoint_name(normed @ w1, "hidden")          # f32[B, T/4, h] on each device
    return x + jnp.tanh(u) @ w2


def sequence_parallel_activations(x, w1, w2):
    block = jax.checkpoint(_body, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    return jax.shard_map(block, in_specs=(P(None, "seq", None), P(), P()),
                         out_specs=P(None, "seq", None))(x, w1, w2)
