import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def loss_save_names_but(params, x, y):
    """params: a list [W1, W2, W3] of float32 arrays of shapes (h1, d), (h2, h1), (o, h2);
    x: float32[d]; y: float32[o]. Returns the float32 scalar sum((predict(params, x) - y) ** 2).

    predict: h = sin(W1 @ x) named "layer0_output", h = sin(W2 @ h) named "layer1_output"
    (with jax.ad_checkpoint.checkpoint_name), then the linear W3 @ h.
    Wrap the whole loss in jax.checkpoint with the policy that saves every named value except
    "layer1_output".
    """
    raise NotImplementedError
