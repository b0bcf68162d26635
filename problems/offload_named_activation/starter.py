import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    """W1: float32[d, h]; W2: float32[h, k]; x: float32[N, d].

    Returns sin(sin(x @ W1) @ W2), float32[N, k]. Name the first layer's output "a" with
    checkpoint_name, and wrap the network in one jax.checkpoint whose policy offloads the value
    named "a" to host memory ("pinned_host") and saves nothing else on the device.
    """
    raise NotImplementedError
