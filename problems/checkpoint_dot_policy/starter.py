import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    """w1, w2: float32[d, d]; x: float32[N, d]. Returns the scalar sum((relu(x @ w1) @ w2) ** 2).

    Wrap the whole computation in jax.checkpoint with the policy that saves only the outputs
    of matrix multiplications without batch dimensions.
    """
    raise NotImplementedError
