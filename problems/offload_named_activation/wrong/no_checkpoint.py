# expect: WRONG_POLICY
# Names the activation but never checkpoints: autodiff keeps both cosines and a, all on the device.
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    a = checkpoint_name(jnp.sin(x @ W1), "a")
    return jnp.sin(a @ W2)
