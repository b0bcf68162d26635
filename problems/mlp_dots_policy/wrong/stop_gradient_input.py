# expect: WRONG_GRADIENT
# Treats x as data that needs no gradient (stop_gradient): the value is right, x's gradient is zero.
import jax
import jax.numpy as jnp


def mlp_dots_policy(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        h = jnp.sin(W1 @ jax.lax.stop_gradient(x))
        h = jnp.sin(W2 @ h)
        return jnp.sin(W3 @ h)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
