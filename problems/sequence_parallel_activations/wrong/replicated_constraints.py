# expect: WRONG_POLICY
# jit style with with_sharding_constraint(P()) on the saved hidden and on the output (replicated
# activations): the hidden is kept whole on every device, f32[B, T, h], 4 times its piece.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _block(x, w1, w2):
    mean = x.mean(axis=-1, keepdims=True)
    normed = (x - mean) * jax.lax.rsqrt(jnp.square(x - mean).mean(axis=-1, keepdims=True) + 1e-6)
    u = checkpoint_name(jax.lax.with_sharding_constraint(normed @ w1, P()), "hidden")
    return jax.lax.with_sharding_constraint(x + jnp.tanh(u) @ w2, P())


def sequence_parallel_activations(x, w1, w2):
    return jax.checkpoint(_block, policy=jax.checkpoint_policies.save_only_these_names("hidden"))(x, w1, w2)
