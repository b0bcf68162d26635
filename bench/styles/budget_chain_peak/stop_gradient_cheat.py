# expect: WRONG_GRADIENT
# stop_gradient on the first pair's output: a smaller peak, no gradient for W1, W2, x (held out: written apart from the package)
import jax
import jax.numpy as jnp


def chain_peak(ws, x):
    h = jax.lax.stop_gradient(jnp.tanh(jnp.tanh(x @ ws[0]) @ ws[1]))
    for w in ws[2:]:
        h = jnp.tanh(h @ w)
    return h
