# expect: WRONG_POLICY
# A jax.custom_vjp that keeps w1, w2, x, the activation a, and two derivatives in place of the matmul
# outputs: 1 - a**2 (f32[N, h], tanh's derivative) and cos(a @ w2) (f32[N, o], sin's derivative).
# Right value, right gradients, the reference's shapes, but two residuals hold other values.
import jax
import jax.numpy as jnp


@jax.custom_vjp
def save_dots_and_named(w1, w2, x):
    return jnp.sum(jnp.sin(jnp.tanh(x @ w1) @ w2))


def _fwd(w1, w2, x):
    a = jnp.tanh(x @ w1)
    u = a @ w2
    return jnp.sum(jnp.sin(u)), (w1, w2, x, a, 1.0 - a ** 2, jnp.cos(u))


def _bwd(res, g):
    w1, w2, x, a, da, cu = res
    gu = g * cu
    gz = (gu @ w2.T) * da
    return x.T @ gz, a.T @ gu, gz @ w1.T


save_dots_and_named.defvjp(_fwd, _bwd)
