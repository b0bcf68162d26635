# expect: WRONG_POLICY
# Puts the name "a" on W1 @ x (before the sin) instead of on the layer output sin(W1 @ x): the
# saved value has the right shape, f32[h1], but it is the pre-activation, not a.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_named_layer(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        a = jnp.sin(checkpoint_name(W1 @ x, "a"))
        b = checkpoint_name(jnp.sin(W2 @ a), "b")
        return checkpoint_name(jnp.sin(W3 @ b), "c")

    policy = jax.checkpoint_policies.save_only_these_names("a")
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
