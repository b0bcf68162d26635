# expect: WRONG_POLICY
# Checkpoints each sin on its own: the inner one's output is the outer one's input, so it is saved too.
import jax
import jax.numpy as jnp


def remat_sin_sin(x):
    return jax.checkpoint(jnp.sin)(jax.checkpoint(jnp.sin)(x))
