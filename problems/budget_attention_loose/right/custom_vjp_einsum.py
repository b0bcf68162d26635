# expect: ACCEPTED
# score: 1.0
# the same residuals as the reference's hand-written VJP (v rebuilt in the backward pass), its
# products written with einsum
import jax
import jax.numpy as jnp


@jax.custom_vjp
def _block(params, x):
    return _forward(params, x)[0]


def _forward(params, x):
    wq, wk, wv, wo, w1, w2 = params
    scale = x.shape[1] ** -0.5
    q, k, v = (jnp.einsum("td,de->te", x, w) for w in (wq, wk, wv))
    s = jnp.einsum("te,se->ts", q, k) * scale
    e = jnp.exp(s - jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True)))
    z = jnp.sum(e, axis=-1)
    a = (e / z[:, None]) @ v
    y = x + a @ wo
    t = jnp.tanh(y @ w1)
    return y + t @ w2, (params, x, q, k, e, z, a, y, t)


def _fwd(params, x):
    return _forward(params, x)


def _bwd(res, g):
    (wq, wk, wv, wo, w1, w2), x, q, k, e, z, a, y, t = res
    scale = x.shape[1] ** -0.5
    v = jnp.einsum("td,de->te", x, wv)  # the forward work done again: one projection
    p = e / z[:, None]  # and one division
    dw2 = t.T @ g
    dh = (g @ w2.T) * (1 - t * t)
    dw1 = y.T @ dh
    dy = g + dh @ w1.T
    dwo = a.T @ dy
    da = dy @ wo.T
    dv = p.T @ da
    dp = da @ v.T
    ds = p * (dp - jnp.sum(dp * p, axis=-1, keepdims=True)) * scale
    dq, dk = ds @ k, ds.T @ q
    dx = dy + dq @ wq.T + dk @ wk.T + dv @ wv.T
    return [x.T @ dq, x.T @ dk, x.T @ dv, dwo, dw1, dw2], dx


_block.defvjp(_fwd, _bwd)


def attention_block(params, x):
    return _block(list(params), x)
