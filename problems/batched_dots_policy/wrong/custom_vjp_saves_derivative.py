# expect: WRONG_POLICY
# A jax.custom_vjp that keeps x, w and the derivative of the elementwise part,
# d/dy tanh(y)^2 = 2 tanh(y) (1 - tanh(y)^2), instead of y: the reference's three shapes, but the
# f32[B, M, P] residual is not the matmul output.
import jax
import jax.numpy as jnp


def _y(x, w):
    return jnp.einsum("bmk,bkp->bmp", x, w)


@jax.custom_vjp
def batched_dots_policy(x, w):
    return jnp.sum(jnp.tanh(_y(x, w)) ** 2)


def _fwd(x, w):
    t = jnp.tanh(_y(x, w))
    return jnp.sum(t ** 2), (x, w, 2.0 * t * (1.0 - t ** 2))


def _bwd(res, g):
    x, w, dy = res
    gy = g * dy
    return jnp.einsum("bmp,bkp->bmk", gy, w), jnp.einsum("bmk,bmp->bkp", x, gy)


batched_dots_policy.defvjp(_fwd, _bwd)
