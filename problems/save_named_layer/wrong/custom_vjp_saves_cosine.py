# expect: WRONG_POLICY
# A jax.custom_vjp that keeps the four arguments and cos(W1 @ x) (the derivative of the first
# sin, also f32[h1]) instead of a = sin(W1 @ x), and rebuilds the rest in its backward pass.
# Right value, right gradients, the reference's shapes, but the wrong f32[h1] value.
import jax
import jax.numpy as jnp


def _net(W1, W2, W3, x):
    a = jnp.sin(W1 @ x)
    b = jnp.sin(W2 @ a)
    return jnp.sin(W3 @ b)


@jax.custom_vjp
def save_named_layer(W1, W2, W3, x):
    return _net(W1, W2, W3, x)


def _fwd(W1, W2, W3, x):
    z1 = W1 @ x
    return _net(W1, W2, W3, x), (W1, W2, W3, x, jnp.cos(z1))


def _bwd(res, g):
    W1, W2, W3, x, c1 = res
    a = jnp.sin(W1 @ x)
    _, tail_vjp = jax.vjp(lambda W2, W3, a: jnp.sin(W3 @ jnp.sin(W2 @ a)), W2, W3, a)
    gW2, gW3, ga = tail_vjp(g)
    gz1 = ga * c1
    return jnp.outer(gz1, x), gW2, gW3, W1.T @ gz1


save_named_layer.defvjp(_fwd, _bwd)
