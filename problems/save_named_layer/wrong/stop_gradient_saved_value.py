# expect: WRONG_GRADIENT
# Puts the saved value behind stop_gradient, as if kept values were constants: W1 and x get zero gradients.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_named_layer(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        a = jax.lax.stop_gradient(checkpoint_name(jnp.sin(W1 @ x), "a"))
        b = checkpoint_name(jnp.sin(W2 @ a), "b")
        return checkpoint_name(jnp.sin(W3 @ b), "c")

    policy = jax.checkpoint_policies.save_only_these_names("a")
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
