# expect: WRONG_ANSWER
# Habit from ordinary MLPs: no sin after the last matmul. The task applies sin in all three layers.
import jax
import jax.numpy as jnp


def mlp_dots_policy(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        h = jnp.sin(W1 @ x)
        h = jnp.sin(W2 @ h)
        return W3 @ h

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
