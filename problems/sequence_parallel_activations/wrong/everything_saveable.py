# expect: WRONG_POLICY
# everything_saveable: jit style, autodiff keeps what the plain block needs (the layer norm's
# intermediates, its output, tanh(u) and its derivative), each device its tokens, not the hidden.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _block(x, w1, w2):
    mean = x.mean(axis=-1, keepdims=True)
    normed = (x - mean) * jax.lax.rsqrt(jnp.square(x - mean).mean(axis=-1, keepdims=True) + 1e-6)
    u = checkpoint_name(jax.lax.with_sharding_constraint(normed @ w1, P(None, "seq", None)), "hidden")
    return x + jnp.tanh(u) @ w2


def sequence_parallel_activations(x, w1, w2):
    return jax.checkpoint(_block, policy=jax.checkpoint_policies.everything_saveable)(x, w1, w2)
