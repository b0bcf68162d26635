# expect: WRONG_POLICY
# Plain per-layer checkpoints: keeps the two layer outputs, not the three matmul outputs.
import jax
import jax.numpy as jnp


def layer(W, v):
    return jnp.sin(W @ v)


def mlp_dots_policy(W1, W2, W3, x):
    wrapped = jax.checkpoint(layer)
    h = wrapped(W1, x)
    h = wrapped(W2, h)
    return wrapped(W3, h)
