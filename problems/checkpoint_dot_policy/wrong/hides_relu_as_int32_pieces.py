# expect: WRONG_POLICY
# Saves the two dot outputs as the policy says, and also relu(x @ w1), bitcast to int32 and cut into
# 256-element pieces that look like loop counters. The judge reads that the pieces are computed from
# the arguments, so they are residuals like any other: extra ones the policy does not save.
import jax
import jax.numpy as jnp
from jax import lax


@jax.custom_vjp
def _square_sum(h, w2):
    return jnp.sum((h @ w2) ** 2)


def _fwd(h, w2):
    y = h @ w2
    bits = lax.bitcast_convert_type(h, jnp.int32).reshape(-1)
    pieces = tuple(bits[i : i + 256] for i in range(0, bits.size, 256))
    return jnp.sum(y**2), (y, w2, pieces, h.shape)


def _bwd(res, g):
    y, w2, pieces, shape = res
    h = lax.bitcast_convert_type(jnp.concatenate(pieces), jnp.float32).reshape(shape)
    gy = 2 * g * y
    return gy @ w2.T, h.T @ gy


_square_sum.defvjp(_fwd, _bwd)


def checkpoint_dot_policy(w1, w2, x):
    z = x @ w1
    return _square_sum(jax.nn.relu(z), w2)
