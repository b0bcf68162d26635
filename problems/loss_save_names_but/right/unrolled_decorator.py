# expect: ACCEPTED
# Style: the layers unrolled by hand, @functools.partial(jax.checkpoint, policy=...) decorator,
# @ for the matmuls and an explicit r * r for the square.
import functools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@functools.partial(
    jax.checkpoint, policy=jax.checkpoint_policies.save_any_names_but_these("layer1_output")
)
def _loss(params, x, y):
    W1, W2, W3 = params
    h0 = checkpoint_name(jnp.sin(W1 @ x), "layer0_output")
    h1 = checkpoint_name(jnp.sin(W2 @ h0), "layer1_output")
    r = W3 @ h1 - y
    return jnp.sum(r * r)


def loss_save_names_but(params, x, y):
    return _loss(params, x, y)
