import jax
import jax.numpy as jnp


def chain_peak(ws, x):
    """Six tanh layers, h <- tanh(h @ W) for each W in ws, returning the last h; keep the residuals
    of every case within its budget."""
    raise NotImplementedError
