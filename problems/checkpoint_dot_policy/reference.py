"""Reference solution of checkpoint_dot_policy. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        h = jax.nn.relu(x @ w1)
        return jnp.sum((h @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
