# expect: WRONG_ANSWER
# Applies sin to the last layer too; the last layer must be linear (W3 @ h).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def loss_save_names_but(params, x, y):
    def loss(params, x, y):
        W1, W2, W3 = params
        h = checkpoint_name(jnp.sin(W1 @ x), "layer0_output")
        h = checkpoint_name(jnp.sin(W2 @ h), "layer1_output")
        return jnp.sum((jnp.sin(W3 @ h) - y) ** 2)

    policy = jax.checkpoint_policies.save_any_names_but_these("layer1_output")
    return jax.checkpoint(loss, policy=policy)(params, x, y)
