# expect: ACCEPTED
# Style: @functools.partial(jax.checkpoint, policy=...) decorator, the two policies given to
# save_from_both_policies in the other order, jnp.einsum for the matmuls.
import functools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

_cp = jax.checkpoint_policies


@functools.partial(
    jax.checkpoint,
    policy=_cp.save_from_both_policies(
        _cp.save_only_these_names("act"), _cp.dots_with_no_batch_dims_saveable
    ),
)
def _net(w1, w2, x):
    a = checkpoint_name(jnp.tanh(jnp.einsum("nd,dh->nh", x, w1)), "act")
    return jnp.sum(jnp.sin(jnp.einsum("nh,ho->no", a, w2)))


def save_dots_and_named(w1, w2, x):
    return _net(w1, w2, x)
