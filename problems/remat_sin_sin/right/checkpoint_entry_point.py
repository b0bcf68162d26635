# expect: ACCEPTED
# Style: the entry point itself decorated with jax.checkpoint, with an explicit nothing_saveable policy.
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
def remat_sin_sin(x):
    return jnp.sin(jnp.sin(x))
