# expect: ACCEPTED
import jax
import jax.numpy as jnp


def _layer(W, v):
    d = W.shape[1]
    b = max(1, d // 4)
    acc = 0.0
    for i in range(0, d, b):
        acc = acc + W[:, i:i + b] @ v[i:i + b]
    return jnp.sin(acc)


def checkpoint_each_layer(W1, W2, W3, x):
    layer = jax.checkpoint(_layer)
    h = layer(W1, x)
    h = layer(W2, h)
    return layer(W3, h)
