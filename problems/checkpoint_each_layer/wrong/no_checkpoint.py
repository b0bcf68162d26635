# expect: WRONG_POLICY
# Right math, no jax.checkpoint: every layer also keeps its cosine, and the first two their sin outputs.
import jax.numpy as jnp


def checkpoint_each_layer(W1, W2, W3, x):
    h = jnp.sin(W1 @ x)
    h = jnp.sin(W2 @ h)
    return jnp.sin(W3 @ h)
