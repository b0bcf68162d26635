# expect: WRONG_POLICY
# Wraps only the sin of each layer: the matmul outputs become checkpoint inputs, and the sin outputs
# are kept for the next matmul's gradient.
import jax
import jax.numpy as jnp


def checkpoint_each_layer(W1, W2, W3, x):
    sin = jax.checkpoint(jnp.sin)
    h = sin(W1 @ x)
    h = sin(W2 @ h)
    return sin(W3 @ h)
