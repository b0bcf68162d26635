# expect: ACCEPTED
# Style: @functools.partial(jax.checkpoint, policy=...) decorator, jnp.einsum matmuls, jnp.maximum as relu.
import functools

import jax
import jax.numpy as jnp


@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def _pipeline(w1, w2, x):
    h = jnp.maximum(jnp.einsum("nd,de->ne", x, w1), 0.0)
    y = jnp.einsum("nd,de->ne", h, w2)
    return jnp.sum(jnp.square(y))


def checkpoint_dot_policy(w1, w2, x):
    return _pipeline(w1, w2, x)
