# expect: WRONG_POLICY
# no checkpoint: every layer's values are kept for the backward pass, far over the peak budget
import jax
import jax.numpy as jnp


def scan_layers(ws, x):
    return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0]
