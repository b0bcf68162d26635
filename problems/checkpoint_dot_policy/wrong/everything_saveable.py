# expect: WRONG_POLICY
# everything_saveable saves every intermediate: as if there were no checkpoint at all.
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=jax.checkpoint_policies.everything_saveable)(w1, w2, x)
