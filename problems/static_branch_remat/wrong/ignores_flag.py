# expect: WRONG_ANSWER
# Ignores is_training and always computes the training branch: wrong on the eval cases.
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, static_argnums=(1,))
def static_branch_remat(x, is_training):
    return jnp.tanh(x) * jax.nn.sigmoid(x)
