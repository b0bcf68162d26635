"""Reference solution of static_branch_remat. Never served, never mounted into a jail."""

from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, static_argnums=(1,))
def static_branch_remat(x, is_training):
    if is_training:
        return jnp.tanh(x) * jax.nn.sigmoid(x)
    return jnp.tanh(x)
