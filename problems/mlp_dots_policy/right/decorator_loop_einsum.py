# expect: ACCEPTED
# Style: @functools.partial(jax.checkpoint, policy=...) decorator on a Python loop over the three
# weights, with jnp.einsum for each matrix-vector product.
import functools

import jax
import jax.numpy as jnp


@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def _network(W1, W2, W3, x):
    h = x
    for W in (W1, W2, W3):
        h = jnp.sin(jnp.einsum("ij,j->i", W, h))
    return h


def mlp_dots_policy(W1, W2, W3, x):
    return _network(W1, W2, W3, x)
