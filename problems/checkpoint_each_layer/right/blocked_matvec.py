# expect: ACCEPTED
# Style: the mat-vec written in two column blocks, each layer checkpointed.
import jax
import jax.numpy as jnp


def _layer(W, v):
    k = W.shape[1] // 2
    return jnp.sin(W[:, :k] @ v[:k] + W[:, k:] @ v[k:])


def checkpoint_each_layer(W1, W2, W3, x):
    h = jax.checkpoint(_layer)(W1, x)
    h = jax.checkpoint(_layer)(W2, h)
    return jax.checkpoint(_layer)(W3, h)
