# expect: ACCEPTED
# Style: the jax.remat alias written at each call, with einsum for the matrix-vector product.
import jax
import jax.numpy as jnp


def layer(W, v):
    return jnp.sin(jnp.einsum("oi,i->o", W, v))


def checkpoint_each_layer(W1, W2, W3, x):
    a = jax.remat(layer)(W1, x)
    b = jax.remat(layer)(W2, a)
    return jax.remat(layer)(W3, b)
