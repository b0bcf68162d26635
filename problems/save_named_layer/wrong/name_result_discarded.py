# expect: WRONG_POLICY
# Calls checkpoint_name but ignores what it returns: the name never enters the computation, nothing is saved.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_named_layer(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        a = jnp.sin(W1 @ x)
        checkpoint_name(a, "a")
        b = jnp.sin(W2 @ a)
        checkpoint_name(b, "b")
        c = jnp.sin(W3 @ b)
        checkpoint_name(c, "c")
        return c

    policy = jax.checkpoint_policies.save_only_these_names("a")
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
