# expect: WRONG_POLICY
# Puts the name layer0_output on W1 @ x, before the sin: the policy saves an f32[h1] as the reference
# does, but it is the pre-activation, not h0 = sin(W1 @ x).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def loss_save_names_but(params, x, y):
    def loss(params, x, y):
        W1, W2, W3 = params
        h0 = jnp.sin(checkpoint_name(W1 @ x, "layer0_output"))
        h1 = checkpoint_name(jnp.sin(W2 @ h0), "layer1_output")
        return jnp.sum((W3 @ h1 - y) ** 2)

    policy = jax.checkpoint_policies.save_any_names_but_these("layer1_output")
    return jax.checkpoint(loss, policy=policy)(params, x, y)
