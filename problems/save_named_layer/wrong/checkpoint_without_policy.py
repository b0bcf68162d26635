# expect: WRONG_POLICY
# Names the layers and wraps the network, but forgets the policy: only the arguments are kept.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_named_layer(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        a = checkpoint_name(jnp.sin(W1 @ x), "a")
        b = checkpoint_name(jnp.sin(W2 @ a), "b")
        return checkpoint_name(jnp.sin(W3 @ b), "c")

    return jax.checkpoint(network)(W1, W2, W3, x)
