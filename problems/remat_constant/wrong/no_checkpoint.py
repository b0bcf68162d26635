# expect: WRONG_POLICY
# Right math, no jax.checkpoint: the constant a is saved for the backward pass (1 x f32[N]).
import jax.numpy as jnp


def remat_constant(x):
    a = jnp.sin(jnp.arange(x.shape[0], dtype=jnp.float32)) ** 2
    return a * x
