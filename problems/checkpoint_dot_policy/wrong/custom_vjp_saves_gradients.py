# expect: WRONG_POLICY
# No checkpoint: a jax.custom_vjp whose forward pass computes the gradients right away and keeps
# them as its five residuals (dL/dw1, dL/dw2 as f32[d, d]; dL/dx, dL/dh, dL/d(x @ w1) as f32[N, d]).
# Right value, right gradients, the reference's shapes, but none of the values the policy saves.
import jax
import jax.numpy as jnp


def _forward(w1, w2, x):
    z = x @ w1
    h = jnp.maximum(z, 0.0)
    y = h @ w2
    gy = 2.0 * y
    gh = gy @ w2.T
    gz = jnp.where(z > 0, gh, 0.0)
    grads = (x.T @ gz, h.T @ gy, gz @ w1.T)  # dL/dw1, dL/dw2, dL/dx
    return jnp.sum(y ** 2), (grads, gh, gz)


@jax.custom_vjp
def checkpoint_dot_policy(w1, w2, x):
    return _forward(w1, w2, x)[0]


def _fwd(w1, w2, x):
    value, (grads, gh, gz) = _forward(w1, w2, x)
    return value, (grads[0], grads[1], grads[2], gh, gz)


def _bwd(res, g):
    gw1, gw2, gx, _gh, _gz = res
    return g * gw1, g * gw2, g * gx


checkpoint_dot_policy.defvjp(_fwd, _bwd)
