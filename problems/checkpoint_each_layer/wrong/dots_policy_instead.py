# expect: WRONG_POLICY
# Uses the "save the matmuls" policy on the whole network: keeps three matmul outputs, not two layer outputs.
import jax
import jax.numpy as jnp


def checkpoint_each_layer(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        h = jnp.sin(W1 @ x)
        h = jnp.sin(W2 @ h)
        return jnp.sin(W3 @ h)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
