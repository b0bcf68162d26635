# expect: ACCEPTED
# score: below 1
# a custom_vjp keeping the weights and each group's first carry; its backward pass rebuilds a group with jax.vjp (held out: written apart from the package)
import jax
import jax.numpy as jnp


def _group(h, wg):
    return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), h, wg)[0]


def _size(n):
    return 4 if n % 4 == 0 and n > 4 else 2


def _grouped(ws):
    n = ws.shape[0]
    g = _size(n)
    return ws.reshape(n // g, g, *ws.shape[1:])


@jax.custom_vjp
def scan_layers(ws, x):
    return jax.lax.scan(lambda h, wg: (_group(h, wg), None), x, _grouped(ws))[0]


def _fwd(ws, x):
    h, starts = jax.lax.scan(lambda h, wg: (_group(h, wg), h), x, _grouped(ws))
    return h, (ws, starts)


def _bwd(res, gh):
    ws, starts = res

    def step(gh, inp):
        wg, h0 = inp
        _, pull = jax.vjp(_group, h0, wg)
        gh0, gwg = pull(gh)
        return gh0, gwg

    gx, gws = jax.lax.scan(step, gh, (_grouped(ws), starts), reverse=True)
    return gws.reshape(ws.shape), gx


scan_layers.defvjp(_fwd, _bwd)
