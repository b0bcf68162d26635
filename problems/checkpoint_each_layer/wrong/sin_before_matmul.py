# expect: WRONG_ANSWER
# Applies sin to the layer's input instead of to the matmul: W @ sin(x), checkpointed per layer.
import jax
import jax.numpy as jnp


def layer(W, v):
    return W @ jnp.sin(v)


def checkpoint_each_layer(W1, W2, W3, x):
    h = jax.checkpoint(layer)(W1, x)
    h = jax.checkpoint(layer)(W2, h)
    return jax.checkpoint(layer)(W3, h)
