# expect: ACCEPTED
# Style: names exactly the three matmul outputs with checkpoint_name and saves them with
# save_only_these_names: the same values the dots policy saves.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def mlp_dots_policy(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        a = jnp.sin(checkpoint_name(jnp.dot(W1, x), "z1"))
        b = jnp.sin(checkpoint_name(jnp.dot(W2, a), "z2"))
        return jnp.sin(checkpoint_name(jnp.dot(W3, b), "z3"))

    policy = jax.checkpoint_policies.save_only_these_names("z1", "z2", "z3")
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
