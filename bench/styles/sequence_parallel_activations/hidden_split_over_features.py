# expect: WRONG_POLICY
# jit style with NamedSharding constraints built from the abstract mesh: the tokens stay split over
# `seq` for x and y, but the hidden is pinned to P(None, None, "seq"), split over its h features
# (the tensor-parallel habit). Each device keeps (B, T, h/4): the same bytes as (B, T/4, h), but a
# different piece of the hidden (all tokens, a quarter of the units) and a reshard in the forward.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def sequence_parallel_activations(x, w1, w2):
    mesh = jax.sharding.get_abstract_mesh()
    tokens = NamedSharding(mesh, P(None, "seq", None))
    features = NamedSharding(mesh, P(None, None, "seq"))

    def block(x, w1, w2):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        normed = xc / jnp.sqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + 1e-6)
        u = checkpoint_name(jax.lax.with_sharding_constraint(jnp.dot(normed, w1), features), "hidden")
        return jax.lax.with_sharding_constraint(x + jnp.dot(jnp.tanh(u), w2), tokens)

    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    return jax.checkpoint(block, policy=policy)(x, w1, w2)
