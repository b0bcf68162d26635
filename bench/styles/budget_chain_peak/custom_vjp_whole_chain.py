# expect: ACCEPTED
# score: below 1
# a hand-written VJP keeping x and the narrow outputs; its backward pass rebuilds every wide layer, the last one too (held out: written apart from the package)
import jax
import jax.numpy as jnp


@jax.custom_vjp
def _chain(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return h


def _fwd(ws, x):
    # residuals: ws, x and the narrow outputs h2, h4, ..., h12; the wide ones are dropped
    h = x
    narrow = []
    for i in range(0, len(ws), 2):
        h = jnp.tanh(jnp.tanh(h @ ws[i]) @ ws[i + 1])
        narrow.append(h)
    return h, (ws, x, narrow)


def _bwd(res, g):
    ws, x, narrow = res
    grads = [None] * len(ws)
    for p in reversed(range(len(narrow))):
        i = 2 * p
        h_in = x if p == 0 else narrow[p - 1]
        h_out = narrow[p]
        wide = jnp.tanh(h_in @ ws[i])  # rebuilt
        dz = g * (1 - h_out * h_out)
        grads[i + 1] = wide.T @ dz
        g = dz @ ws[i + 1].T
        dz = g * (1 - wide * wide)
        grads[i] = h_in.T @ dz
        g = dz @ ws[i].T
    return grads, g


_chain.defvjp(_fwd, _bwd)


def chain_peak(ws, x):
    return _chain(list(ws), x)
