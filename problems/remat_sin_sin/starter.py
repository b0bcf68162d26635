import jax
import jax.numpy as jnp


def remat_sin_sin(x):
    """x: float32[N]. Returns float32[N], the elementwise sin(sin(x)) (not summed).

    Wrap the computation in jax.checkpoint so that the VJP keeps only x and recomputes
    everything else in the backward pass.
    """
    raise NotImplementedError
