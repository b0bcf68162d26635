import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    """x: float32[B, M, K]; w: float32[B, K, P]. Returns the float32 scalar
    sum(tanh(einsum('bmk,bkp->bmp', x, w)) ** 2).

    Wrap the whole computation in jax.checkpoint with a policy that lets the batched matmul's
    output be saved, and nothing else.
    """
    raise NotImplementedError
