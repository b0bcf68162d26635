# expect: WRONG_GRADIENT
# Detaches each layer's input, as if a checkpoint boundary had to cut the graph: only W3 gets a gradient.
import jax
import jax.numpy as jnp


def layer(W, v):
    return jnp.sin(W @ jax.lax.stop_gradient(v))


def checkpoint_each_layer(W1, W2, W3, x):
    h = jax.checkpoint(layer)(W1, x)
    h = jax.checkpoint(layer)(W2, h)
    return jax.checkpoint(layer)(W3, h)
