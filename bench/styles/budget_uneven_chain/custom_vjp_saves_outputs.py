# expect: ACCEPTED
# score: 1.0
# A hand-written VJP for the whole chain. It keeps the four narrow tanh OUTPUTS h2, h3, h5, h6
# (tanh' = 1 - h^2 needs no product) besides the arguments, and rebuilds only the two wide
# activations in the backward pass: h1 = tanh(x W1) and h4 = tanh(h3 W4) (the least any policy
# within the budget can recompute: two wide products and their tanh).
import jax
import jax.numpy as jnp


def _forward(ws, x):
    hs = [x]
    for w in ws:
        hs.append(jnp.tanh(hs[-1] @ w))
    return hs


@jax.custom_vjp
def uneven_chain(ws, x):
    return _forward(ws, x)[-1]


def _fwd(ws, x):
    hs = _forward(ws, x)
    return hs[6], (ws, x, hs[2], hs[3], hs[5], hs[6])


def _bwd(res, g):
    ws, x, h2, h3, h5, h6 = res
    h1 = jnp.tanh(x @ ws[0])            # recomputed: wide
    h4 = jnp.tanh(h3 @ ws[3])           # recomputed: wide
    hs = [x, h1, h2, h3, h4, h5, h6]
    dws = [None] * 6
    for i in reversed(range(6)):
        dz = g * (1.0 - hs[i + 1] * hs[i + 1])
        dws[i] = hs[i].T @ dz
        g = dz @ ws[i].T
    return list(dws), g


uneven_chain.defvjp(_fwd, _bwd)
