# expect: ACCEPTED
# Style: a decorated layer function, the layers taken in sorted key order.
import jax
import jax.numpy as jnp


@jax.checkpoint
def dense(layer, h):
    return jnp.tanh(jnp.dot(h, layer["kernel"]) + layer["bias"])


def mlp_params_tree(params, x):
    h = x
    for name in sorted(params):
        h = dense(params[name], h)
    return h
