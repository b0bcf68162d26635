# expect: WRONG_POLICY
# Checkpoints only the outer sin: it keeps sin(x), and the unwrapped inner sin still saves a cosine.
import jax
import jax.numpy as jnp


def remat_sin_sin(x):
    return jax.checkpoint(jnp.sin)(jnp.sin(x))
