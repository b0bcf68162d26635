# A hand-written VJP whose backward pass reads q, k, v, the softmax's exponentials and row sums, the
# attention output, the residual sum and tanh of the hidden layer: 590,336 bytes in `large`, over the
# budget of 560,000, so something must be recomputed. A checkpoint around the VJP keeps every one of
# its residuals by name but v: the backward pass rebuilds v = x @ Wv (one projection, the cheapest
# value of that size to rebuild) and the probabilities (one division). No names policy over plain
# autodiff gets there: a name after softmax or tanh is never read.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

KEPT = ("q", "k", "e", "z", "a", "y", "t")  # every residual of the VJP but v


@jax.custom_vjp
def _block(params, x):
    return _forward(params, x)[0]


def _forward(params, x):
    wq, wk, wv, wo, w1, w2 = params
    scale = x.shape[1] ** -0.5
    q, k, v = checkpoint_name(x @ wq, "q"), checkpoint_name(x @ wk, "k"), checkpoint_name(x @ wv, "v")
    s = (q @ k.T) * scale
    e = checkpoint_name(jnp.exp(s - jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True))), "e")
    z = checkpoint_name(jnp.sum(e, axis=-1), "z")
    a = checkpoint_name((e / z[:, None]) @ v, "a")
    y = checkpoint_name(x + a @ wo, "y")
    t = checkpoint_name(jnp.tanh(y @ w1), "t")
    return y + t @ w2, (params, x, q, k, v, e, z, a, y, t)


def _fwd(params, x):
    return _forward(params, x)


def _bwd(res, g):
    (wq, wk, wv, wo, w1, w2), x, q, k, v, e, z, a, y, t = res
    scale = x.shape[1] ** -0.5
    p = e / z[:, None]  # forward work done again: one division
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
    policy = jax.checkpoint_policies.save_only_these_names(*KEPT)
    return jax.checkpoint(_block, policy=policy)(list(params), x)


def _named_block(params, x):
    """The same block for autodiff, its values named for names policies (the schedules below)."""
    from jax.ad_checkpoint import checkpoint_name

    wq, wk, wv, wo, w1, w2 = params
    q, k, v = (checkpoint_name(x @ w, n) for w, n in ((wq, "q"), (wk, "k"), (wv, "v")))
    s = checkpoint_name((q @ k.T) * (x.shape[1] ** -0.5), "scores")
    a = checkpoint_name(jax.nn.softmax(s, axis=-1) @ v, "attended")
    y = checkpoint_name(x + a @ wo, "y")
    return y + jnp.tanh(checkpoint_name(y @ w1, "hidden")) @ w2


def _policy(policy):
    return lambda params, x: jax.checkpoint(_named_block, policy=policy)(list(params), x)


# common policies, measured by the judge and drawn on the panel beside the optimum
SCHEDULES = {
    "every matmul output (dots_saveable)": _policy(jax.checkpoint_policies.dots_saveable),
    "the projections q, k, v": _policy(jax.checkpoint_policies.save_only_these_names("q", "k", "v")),
    "the attention scores": _policy(jax.checkpoint_policies.save_only_these_names("scores")),
    "attended, y and hidden": _policy(jax.checkpoint_policies.save_only_these_names("attended", "y", "hidden")),
}
