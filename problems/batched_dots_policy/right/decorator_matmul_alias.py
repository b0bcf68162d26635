# expect: ACCEPTED
# Style: @functools.partial(jax.checkpoint, policy=checkpoint_dots) decorator (the alias of
# dots_saveable), the batched matmul written x @ w, jnp.square.
import functools

import jax
import jax.numpy as jnp


@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.checkpoint_dots)
def _loss(x, w):
    return jnp.sum(jnp.square(jnp.tanh(x @ w)))


def batched_dots_policy(x, w):
    return _loss(x, w)
