"""Reference solution of checkpoint_each_layer. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp


def _layer(W, v):
    return jnp.sin(W @ v)


def checkpoint_each_layer(W1, W2, W3, x):
    layer = jax.checkpoint(_layer)
    h = layer(W1, x)
    h = layer(W2, h)
    return layer(W3, h)
