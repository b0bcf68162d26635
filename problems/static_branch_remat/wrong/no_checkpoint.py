# expect: WRONG_POLICY
# Right branches, no jax.checkpoint: autodiff saves tanh's and sigmoid's values instead of just x.
import jax
import jax.numpy as jnp


def static_branch_remat(x, is_training):
    if is_training:
        return jnp.tanh(x) * jax.nn.sigmoid(x)
    return jnp.tanh(x)
