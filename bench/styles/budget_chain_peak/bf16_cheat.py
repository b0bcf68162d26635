# expect: WRONG_ANSWER
# no checkpoint, the wide layers in bfloat16 so their residuals fit: values off (held out: written apart from the package)
import jax.numpy as jnp


def chain_peak(ws, x):
    h = x
    for i, w in enumerate(ws):
        if i % 2 == 0:
            h = jnp.tanh(h.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32)
        else:
            h = jnp.tanh(h @ w)
    return h
