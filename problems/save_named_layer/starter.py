import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_named_layer(W1, W2, W3, x):
    """W1: float32[h1, d]; W2: float32[h2, h1]; W3: float32[h3, h2]; x: float32[d].

    Applies three layers, x <- sin(W @ x) with W1, then W2, then W3, naming their outputs
    "a", "b" and "c" with checkpoint_name, and returns the last layer's output, float32[h3]
    (not summed).

    Wrap the whole network in one jax.checkpoint whose policy saves only the value named "a".
    """
    raise NotImplementedError
