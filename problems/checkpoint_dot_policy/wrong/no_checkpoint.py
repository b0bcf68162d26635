# expect: WRONG_POLICY
# Right math, no jax.checkpoint: autodiff also saves the relu mask and the pre-square values.
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
