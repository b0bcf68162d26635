# expect: ACCEPTED
# score: below 1
# a hand-written VJP keeping x and the narrow h2..h6; its backward pass rebuilds both wide layers (held out: written apart from the package)
import jax
import jax.numpy as jnp


@jax.custom_vjp
def _chain(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return h


def _fwd(ws, x):
    h1 = jnp.tanh(x @ ws[0])
    h2 = jnp.tanh(h1 @ ws[1])
    hs = [h2]
    h = h2
    for w in ws[2:]:
        h = jnp.tanh(h @ w)
        hs.append(h)
    # residuals: ws, x, h2, h3, h4 (wide!) ... keep only narrow ones: h2, h3, h5, h6; h4 is wide
    return h, (ws, x, hs[0], hs[1], hs[3], hs[4])


def _bwd(res, g):
    ws, x, h2, h3, h5, h6 = res
    # layer 6: h6 = tanh(h5 W6)
    dz = g * (1 - h6 * h6)
    dW6 = h5.T @ dz
    g = dz @ ws[5].T
    # layer 5: h5 = tanh(h4 W5); rebuild wide h4 = tanh(h3 W4)
    h4 = jnp.tanh(h3 @ ws[3])
    dz = g * (1 - h5 * h5)
    dW5 = h4.T @ dz
    g = dz @ ws[4].T
    # layer 4
    dz = g * (1 - h4 * h4)
    dW4 = h3.T @ dz
    g = dz @ ws[3].T
    # layer 3
    dz = g * (1 - h3 * h3)
    dW3 = h2.T @ dz
    g = dz @ ws[2].T
    # wide pair: rebuild h1
    h1 = jnp.tanh(x @ ws[0])
    dz = g * (1 - h2 * h2)
    dW2 = h1.T @ dz
    g = dz @ ws[1].T
    dz = g * (1 - h1 * h1)
    dW1 = x.T @ dz
    dx = dz @ ws[0].T
    return [dW1, dW2, dW3, dW4, dW5, dW6], dx


_chain.defvjp(_fwd, _bwd)


def chain_peak(ws, x):
    return _chain(list(ws), x)
