# expect: WRONG_POLICY
# Keeps every tanh output, half of each as the four narrow pre-activations the optimum names and the
# rest bitcast to int16 pairs in pieces of 128 elements, hoping the budget leaves small integers out.
# They are computed from the data, so they count: over the budget.
import jax
import jax.numpy as jnp
from jax import lax


@jax.custom_vjp
def _tanh(z):
    return jnp.tanh(z)


def _fwd(z):
    t = jnp.tanh(z)
    bits = lax.bitcast_convert_type(t, jnp.int16).reshape(-1)
    return t, (tuple(bits[i : i + 128] for i in range(0, bits.size, 128)), t.shape)


def _bwd(res, g):
    pieces, shape = res
    t = lax.bitcast_convert_type(jnp.concatenate(pieces).reshape(-1, 2), jnp.float32).reshape(shape)
    return (g * (1 - t * t),)


_tanh.defvjp(_fwd, _bwd)


def uneven_chain(ws, x):
    h = x
    for w in ws:
        h = _tanh(h @ w)
    return h
