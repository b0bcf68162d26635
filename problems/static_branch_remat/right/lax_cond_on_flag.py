# expect: ACCEPTED
# Style: lax.cond on the static flag inside the checkpoint: the exported backward pass holds a
# `case` on a literal index, and only the branch it selects counts as recomputation.
from functools import partial
import jax
import jax.numpy as jnp


@partial(jax.checkpoint, static_argnums=(1,))
def static_branch_remat(x, is_training):
    return jax.lax.cond(is_training, lambda v: jnp.tanh(v) * jax.nn.sigmoid(v), jnp.tanh, x)
