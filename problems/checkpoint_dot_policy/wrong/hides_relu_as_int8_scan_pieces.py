# expect: WRONG_POLICY
# Keeps relu(x @ w1) quantized to int8 in 16-element pieces stacked by a lax.scan, so each piece is
# a small integer array next to the scan's own counter. Quantized values still come from the data:
# they are compared and counted like any residual (and the gradient is off as well).
import jax
import jax.numpy as jnp
from jax import lax


@jax.custom_vjp
def _square_sum(h, w2):
    return jnp.sum((h @ w2) ** 2)


def _fwd(h, w2):
    y = h @ w2
    scale = jnp.max(jnp.abs(h)) + 1e-30
    flat = h.reshape(-1, 16) / scale

    def piece(carry, row):
        return carry, jnp.round(row * 127).astype(jnp.int8)

    _, q = lax.scan(piece, 0, flat)
    return jnp.sum(y**2), (y, w2, q, scale, h.shape)


def _bwd(res, g):
    y, w2, q, scale, shape = res
    h = (q.astype(jnp.float32) / 127 * scale).reshape(shape)
    gy = 2 * g * y
    return gy @ w2.T, h.T @ gy


_square_sum.defvjp(_fwd, _bwd)


def checkpoint_dot_policy(w1, w2, x):
    return _square_sum(jax.nn.relu(x @ w1), w2)
