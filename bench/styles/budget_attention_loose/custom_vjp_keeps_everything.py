# expect: WRONG_POLICY
# a hand-written VJP that also keeps the scores and the hidden pre-activation: over the budget (held out: written apart from the package)
import jax
import jax.numpy as jnp


@jax.custom_vjp
def block(params, x):
    return _fwd(params, x)[0]


def _fwd(params, x):
    wq, wk, wv, wo, w1, w2 = params
    q, k, v = x @ wq, x @ wk, x @ wv
    s = (q @ k.T) * (x.shape[1] ** -0.5)
    p = jax.nn.softmax(s, axis=-1)
    a = p @ v
    y = x + a @ wo
    h = y @ w1
    t = jnp.tanh(h)
    return y + t @ w2, (params, x, q, k, v, s, p, a, y, h, t)


def _bwd(res, g):
    (wq, wk, wv, wo, w1, w2), x, q, k, v, s, p, a, y, h, t = res
    dh = (g @ w2.T) * (1 - t * t)
    dy = g + dh @ w1.T
    da = dy @ wo.T
    dp = da @ v.T
    ds = p * (dp - jnp.sum(dp * p, axis=-1, keepdims=True)) * (x.shape[1] ** -0.5)
    dq, dk, dv = ds @ k, ds.T @ q, p.T @ da
    dx = dy + dq @ wq.T + dk @ wk.T + dv @ wv.T
    return [x.T @ dq, x.T @ dk, x.T @ dv, a.T @ dy, y.T @ dh, t.T @ g], dx


block.defvjp(_fwd, _bwd)


def attention_block(params, x):
    return block(list(params), x)
