# expect: WRONG_POLICY
# Right math, no jax.checkpoint: keeps the sin outputs and all three cosines instead of the matmul outputs.
import jax.numpy as jnp


def mlp_dots_policy(W1, W2, W3, x):
    h = jnp.sin(W1 @ x)
    h = jnp.sin(W2 @ h)
    return jnp.sin(W3 @ h)
