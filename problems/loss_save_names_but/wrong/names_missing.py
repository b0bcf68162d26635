# expect: WRONG_POLICY
# The right policy, but no checkpoint_name calls: with no named values, only the arguments are saved.
import jax
import jax.numpy as jnp


def loss_save_names_but(params, x, y):
    def loss(params, x, y):
        W1, W2, W3 = params
        h = jnp.sin(W1 @ x)
        h = jnp.sin(W2 @ h)
        return jnp.sum((W3 @ h - y) ** 2)

    policy = jax.checkpoint_policies.save_any_names_but_these("layer1_output")
    return jax.checkpoint(loss, policy=policy)(params, x, y)
