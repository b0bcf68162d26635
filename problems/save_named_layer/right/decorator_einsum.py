# expect: ACCEPTED
# Style: @functools.partial(jax.checkpoint, policy=save_only_these_names("a")) decorator, jnp.einsum
# for the matrix-vector products.
import functools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("a"))
def _network(W1, W2, W3, x):
    a = checkpoint_name(jnp.sin(jnp.einsum("ij,j->i", W1, x)), "a")
    b = checkpoint_name(jnp.sin(jnp.einsum("ij,j->i", W2, a)), "b")
    return checkpoint_name(jnp.sin(jnp.einsum("ij,j->i", W3, b)), "c")


def save_named_layer(W1, W2, W3, x):
    return _network(W1, W2, W3, x)
