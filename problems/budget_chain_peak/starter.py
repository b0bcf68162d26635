import jax
import jax.numpy as jnp


def chain_peak(ws, x):
    """Twelve tanh layers, h <- tanh(h @ W) for each W in ws, returning the last h; keep the
    backward pass's peak of every case within its budget."""
    raise NotImplementedError
