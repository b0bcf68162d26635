# expect: WRONG_GRADIENT
# a hand-written VJP with 1 - t where 1 - t**2 is the derivative of tanh (held out: written apart from the package)
import jax
import jax.numpy as jnp


@jax.custom_vjp
def _block(params, x):
    return _forward(params, x)[0]


def _forward(params, x):
    wq, wk, wv, wo, w1, w2 = params
    sc = 1.0 / jnp.sqrt(jnp.float32(x.shape[1]))
    q, k, v = x @ wq, x @ wk, x @ wv
    s = (q @ k.T) * sc
    e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    z = e.sum(axis=-1, keepdims=True)
    a = (e / z) @ v
    y = x + a @ wo
    t = jnp.tanh(y @ w1)
    return y + t @ w2, (params, x, q, k, v, e, z, a, y, t)


def _fwd(params, x):
    return _forward(params, x)


def _bwd(res, g):
    (wq, wk, wv, wo, w1, w2), x, q, k, v, e, z, a, y, t = res
    sc = 1.0 / jnp.sqrt(jnp.float32(x.shape[1]))
    p = e / z
    dh = (g @ w2.T) * (1 - t)  # BUG: should be 1 - t**2
    dy = g + dh @ w1.T
    da = dy @ wo.T
    dp = da @ v.T
    ds = p * (dp - jnp.sum(dp * p, axis=-1, keepdims=True)) * sc
    dq, dk, dv = ds @ k, ds.T @ q, p.T @ da
    dx = dy + dq @ wq.T + dk @ wk.T + dv @ wv.T
    return [x.T @ dq, x.T @ dk, x.T @ dv, a.T @ dy, y.T @ dh, t.T @ g], dx


_block.defvjp(_fwd, _bwd)


def attention_block(params, x):
    return _block(list(params), x)
