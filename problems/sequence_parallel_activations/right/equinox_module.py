# expect: ACCEPTED
# Style: an Equinox module with the two kernels, its __call__ checkpointed with
# eqx.filter_checkpoint and the named policy; with_sharding_constraint keeps the tokens over `seq`.
import equinox as eqx
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


class PreNormMLP(eqx.Module):
    w1: jax.Array
    w2: jax.Array

    def __call__(self, x):
        mean = x.mean(-1, keepdims=True)
        normed = (x - mean) * jax.lax.rsqrt(jnp.square(x - mean).mean(-1, keepdims=True) + 1e-6)
        u = checkpoint_name(jax.lax.with_sharding_constraint(normed @ self.w1, P(None, "seq", None)), "hidden")
        return x + jnp.tanh(u) @ self.w2


def sequence_parallel_activations(x, w1, w2):
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    return eqx.filter_checkpoint(PreNormMLP.__call__, policy=policy)(PreNormMLP(w1, w2), x)
