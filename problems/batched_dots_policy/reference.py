"""Reference solution of batched_dots_policy. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    def loss(x, w):
        y = jnp.einsum("bmk,bkp->bmp", x, w)
        return jnp.sum(jnp.tanh(y) ** 2)

    return jax.checkpoint(loss, policy=jax.checkpoint_policies.dots_saveable)(x, w)
