# expect: WRONG_POLICY
# Every tanh output kept as its raw bytes (uint8, four per float) in pieces of one element each,
# the smallest bookkeeping-sized residuals there are. Still computed from the data: over the budget.
import jax
import jax.numpy as jnp
from jax import lax


@jax.custom_vjp
def _tanh(z):
    return jnp.tanh(z)


def _fwd(z):
    t = jnp.tanh(z)
    raw = lax.bitcast_convert_type(t, jnp.uint8).reshape(-1)
    n = min(raw.size, 64)  # the first 64 bytes one by one, the rest in one piece
    return t, (tuple(raw[i : i + 1] for i in range(n)), raw[n:], t.shape)


def _bwd(res, g):
    ones, rest, shape = res
    raw = jnp.concatenate([*ones, rest]).reshape(-1, 4)
    t = lax.bitcast_convert_type(raw, jnp.float32).reshape(shape)
    return (g * (1 - t * t),)


_tanh.defvjp(_fwd, _bwd)


def uneven_chain(ws, x):
    h = x
    for w in ws:
        h = _tanh(h @ w)
    return h
