# expect: ACCEPTED
# a hand-written per-layer checkpoint: saves each layer's input, recomputes its product once
import jax
import jax.numpy as jnp


@jax.custom_vjp
def layer(W, v):
    return jnp.sin(W @ v)


def fwd(W, v):
    return jnp.sin(W @ v), (W, v)


def bwd(res, g):
    W, v = res
    gz = g * jnp.cos(W @ v)
    return jnp.outer(gz, v), W.T @ gz


layer.defvjp(fwd, bwd)


def checkpoint_each_layer(W1, W2, W3, x):
    return layer(W3, layer(W2, layer(W1, x)))
