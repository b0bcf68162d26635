# expect: WRONG_POLICY
# A hand-written VJP whose forward rule keeps every activation h1..h6 (including the two wide
# ones) so that the backward pass recomputes nothing: in `large` that is 2 x 131,072 + 4 x 16,384
# bytes beyond the arguments' 573,440, over the 640,000 budget.
import jax
import jax.numpy as jnp


@jax.custom_vjp
def uneven_chain(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return h


def _fwd(ws, x):
    hs = [x]
    for w in ws:
        hs.append(jnp.tanh(hs[-1] @ w))
    return hs[-1], (ws, hs)


def _bwd(res, g):
    ws, hs = res
    dws = []
    for i in reversed(range(len(ws))):
        dz = g * (1.0 - jnp.square(hs[i + 1]))
        dws.append(hs[i].T @ dz)
        g = dz @ ws[i].T
    return dws[::-1], g


uneven_chain.defvjp(_fwd, _bwd)
