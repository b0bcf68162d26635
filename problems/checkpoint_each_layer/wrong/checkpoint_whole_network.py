# expect: WRONG_POLICY
# One jax.checkpoint around all three layers: only the arguments are kept, no layer boundaries.
import jax
import jax.numpy as jnp


def checkpoint_each_layer(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        h = jnp.sin(W1 @ x)
        h = jnp.sin(W2 @ h)
        return jnp.sin(W3 @ h)

    return jax.checkpoint(network)(W1, W2, W3, x)
