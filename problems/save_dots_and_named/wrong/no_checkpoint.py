# expect: WRONG_POLICY
# Right math, no jax.checkpoint: autodiff also saves tanh's output, 1 - tanh**2 and cos(a @ w2).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    a = checkpoint_name(jnp.tanh(x @ w1), "act")
    return jnp.sum(jnp.sin(a @ w2))
