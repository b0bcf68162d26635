# expect: WRONG_POLICY
# Checkpoints only tanh: the product with sigmoid outside the checkpoint still saves its values
# in training mode (4 arrays instead of 1).
import jax
import jax.numpy as jnp


def static_branch_remat(x, is_training):
    t = jax.checkpoint(jnp.tanh)(x)
    if is_training:
        return t * jax.nn.sigmoid(x)
    return t
