# expect: WRONG_POLICY
# jax.checkpoint with no policy keeps only the arguments: every matmul runs again in the backward pass.
import jax
import jax.numpy as jnp


def mlp_dots_policy(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        h = jnp.sin(W1 @ x)
        h = jnp.sin(W2 @ h)
        return jnp.sin(W3 @ h)

    return jax.checkpoint(network)(W1, W2, W3, x)
