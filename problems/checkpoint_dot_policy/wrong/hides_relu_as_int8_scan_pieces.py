# expect: WRONG_POLICY
# Keeps relu(x @ w1) as its raw bytes (int8, four per float) in 16-byte pieces stacked by a
# lax.scan, so each piece is a small integer array next to the scan's own counter, and the
# gradients are exact. The bytes still come from the data: they are compared and counted like any
# residual, extra ones the policy does not save.
import jax
import jax.numpy as jnp
from jax import lax


@jax.custom_vjp
def _square_sum(h, w2):
    return jnp.sum((h @ w2) ** 2)


def _fwd(h, w2):
    y = h @ w2
    raw = lax.bitcast_convert_type(h, jnp.int8).reshape(-1, 16)

    def piece(carry, row):
        return carry, row

    _, pieces = lax.scan(piece, 0, raw)
    return jnp.sum(y**2), (y, w2, pieces, h.shape)


def _bwd(res, g):
    y, w2, pieces, shape = res
    h = lax.bitcast_convert_type(pieces.reshape(-1, 4), jnp.float32).reshape(shape)
    gy = 2 * g * y
    return gy @ w2.T, h.T @ gy


_square_sum.defvjp(_fwd, _bwd)


def checkpoint_dot_policy(w1, w2, x):
    return _square_sum(jax.nn.relu(x @ w1), w2)
