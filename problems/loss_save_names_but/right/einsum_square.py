# expect: ACCEPTED
# Style: jnp.einsum for the matrix-vector products, jnp.square, checkpoint_name with name=, and the
# checkpointed loss built in call form with the policy stored in a variable first.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _predict(W1, W2, W3, x):
    h0 = checkpoint_name(jnp.sin(jnp.einsum("ij,j->i", W1, x)), name="layer0_output")
    h1 = checkpoint_name(jnp.sin(jnp.einsum("ij,j->i", W2, h0)), name="layer1_output")
    return jnp.einsum("ij,j->i", W3, h1)


def loss_save_names_but(params, x, y):
    def loss(params, x, y):
        return jnp.square(_predict(*params, x) - y).sum()

    keep_all_but_layer1 = jax.checkpoint_policies.save_any_names_but_these("layer1_output")
    checkpointed = jax.checkpoint(loss, policy=keep_all_but_layer1)
    return checkpointed(params, x, y)
