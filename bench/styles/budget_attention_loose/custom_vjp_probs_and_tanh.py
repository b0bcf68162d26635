# expect: WRONG_POLICY
# a hand-written VJP keeping q, k, v, the softmax probabilities, attended, y and tanh's output (held out: written apart from the package): 589,824 bytes, over the budget of 560,000, which is below what recomputing nothing needs
import jax
import jax.numpy as jnp


def _fwd_impl(params, x):
    wq, wk, wv, wo, w1, w2 = params
    q = jnp.matmul(x, wq)
    k = jnp.matmul(x, wk)
    v = jnp.matmul(x, wv)
    s = jnp.matmul(q, k.T) / jnp.sqrt(jnp.float32(x.shape[-1]))
    s = s - jnp.max(s, axis=-1, keepdims=True)
    e = jnp.exp(s)
    p = e / jnp.sum(e, axis=-1, keepdims=True)
    a = jnp.matmul(p, v)
    y = x + jnp.matmul(a, wo)
    t = jnp.tanh(jnp.matmul(y, w1))
    out = y + jnp.matmul(t, w2)
    return out, (tuple(params), x, q, k, v, p, a, y, t)


@jax.custom_vjp
def block(params, x):
    return _fwd_impl(params, x)[0]


def block_fwd(params, x):
    return _fwd_impl(params, x)


def block_bwd(res, g):
    (wq, wk, wv, wo, w1, w2), x, q, k, v, p, a, y, t = res
    c = 1.0 / jnp.sqrt(jnp.float32(x.shape[-1]))
    gw2 = jnp.matmul(t.T, g)
    gpre = jnp.matmul(g, w2.T) * (1.0 - jnp.square(t))
    gw1 = jnp.matmul(y.T, gpre)
    gy = g + jnp.matmul(gpre, w1.T)
    gwo = jnp.matmul(a.T, gy)
    ga = jnp.matmul(gy, wo.T)
    gv = jnp.matmul(p.T, ga)
    gp = jnp.matmul(ga, v.T)
    gs = p * (gp - jnp.sum(gp * p, axis=-1, keepdims=True)) * c
    gq = jnp.matmul(gs, k)
    gk = jnp.matmul(gs.T, q)
    gx = gy + jnp.matmul(gq, wq.T) + jnp.matmul(gk, wk.T) + jnp.matmul(gv, wv.T)
    return [jnp.matmul(x.T, gq), jnp.matmul(x.T, gk), jnp.matmul(x.T, gv), gwo, gw1, gw2], gx


block.defvjp(block_fwd, block_bwd)


def attention_block(params, x):
    return block(list(params), x)
