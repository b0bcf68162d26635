# expect: WRONG_ANSWER
# Forgets the final sum: returns an (N, d) array instead of a scalar.
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return (jax.nn.relu(x @ w1) @ w2) ** 2

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
