# expect: RUNTIME_ERROR
# Passes the names as one list; the policy takes them as separate strings (TypeError: unhashable type: 'list').
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def loss_save_names_but(params, x, y):
    def loss(params, x, y):
        W1, W2, W3 = params
        h = checkpoint_name(jnp.sin(W1 @ x), "layer0_output")
        h = checkpoint_name(jnp.sin(W2 @ h), "layer1_output")
        return jnp.sum((W3 @ h - y) ** 2)

    policy = jax.checkpoint_policies.save_any_names_but_these(["layer1_output"])
    return jax.checkpoint(loss, policy=policy)(params, x, y)
