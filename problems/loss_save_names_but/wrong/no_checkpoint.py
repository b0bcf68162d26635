# expect: WRONG_POLICY
# Names the layers but never wraps the loss in jax.checkpoint: checkpoint_name alone changes nothing.
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def loss_save_names_but(params, x, y):
    W1, W2, W3 = params
    h = checkpoint_name(jnp.sin(W1 @ x), "layer0_output")
    h = checkpoint_name(jnp.sin(W2 @ h), "layer1_output")
    return jnp.sum((W3 @ h - y) ** 2)
