# expect: ACCEPTED
# Style: functools.partial(jax.checkpoint, static_argnums=..., policy=nothing_saveable) as a
# decorator on a helper, with the sigmoid written out as 1 / (1 + exp(-x)) and a conditional expression.
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, static_argnums=(1,), policy=jax.checkpoint_policies.nothing_saveable)
def _gated_tanh(x, gate):
    t = jnp.tanh(x)
    return t * (1.0 / (1.0 + jnp.exp(-x))) if gate else t


def static_branch_remat(x, is_training):
    return _gated_tanh(x, bool(is_training))
