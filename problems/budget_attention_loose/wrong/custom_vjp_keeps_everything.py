# expect: WRONG_POLICY
# a hand-written VJP that keeps every value its backward pass reads (q, k, v, the exponentials and
# their row sums, the attention output, the residual sum, tanh of the hidden layer) and recomputes
# only the division: 590,336 bytes in `large`, over the budget, which is set below what keeping
# everything takes
import jax
import jax.numpy as jnp


@jax.custom_vjp
def _block(params, x):
    return _forward(params, x)[0]


def _forward(params, x):
    wq, wk, wv, wo, w1, w2 = params
    scale = x.shape[1] ** -0.5
    q, k, v = x @ wq, x @ wk, x @ wv
    s = (q @ k.T) * scale
    e = jnp.exp(s - jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True)))
    z = jnp.sum(e, axis=-1)
    a = (e / z[:, None]) @ v
    y = x + a @ wo
    t = jnp.tanh(y @ w1)
    return y + t @ w2, (params, x, q, k, v, e, z, a, y, t)


def _fwd(params, x):
    return _forward(params, x)


def _bwd(res, g):
    (wq, wk, wv, wo, w1, w2), x, q, k, v, e, z, a, y, t = res
    scale = x.shape[1] ** -0.5
    p = e / z[:, None]  # the only forward work done again: one division
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
