# expect: WRONG_POLICY
# Reads "all names but layer1_output" backwards: save_only_these_names("layer1_output") keeps layer1, not layer0.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def loss_save_names_but(params, x, y):
    def loss(params, x, y):
        W1, W2, W3 = params
        h = checkpoint_name(jnp.sin(W1 @ x), "layer0_output")
        h = checkpoint_name(jnp.sin(W2 @ h), "layer1_output")
        return jnp.sum((W3 @ h - y) ** 2)

    policy = jax.checkpoint_policies.save_only_these_names("layer1_output")
    return jax.checkpoint(loss, policy=policy)(params, x, y)
