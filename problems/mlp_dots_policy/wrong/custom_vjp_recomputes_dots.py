# expect: WRONG_POLICY
# Saves exactly the policy's values (the weights, x and the three matmul outputs), but the
# backward rule ignores the saved matmul outputs and recomputes them from the weights.
import jax
import jax.numpy as jnp


@jax.custom_vjp
def net(W1, W2, W3, x):
    return jnp.sin(W3 @ jnp.sin(W2 @ jnp.sin(W1 @ x)))


def _fwd(W1, W2, W3, x):
    z1 = W1 @ x
    z2 = W2 @ jnp.sin(z1)
    z3 = W3 @ jnp.sin(z2)
    return jnp.sin(z3), (W1, W2, W3, x, z1, z2, z3)


def _bwd(res, g):
    W1, W2, W3, x, _z1, _z2, _z3 = res
    z1 = W1 @ x  # recomputed instead of read
    h1 = jnp.sin(z1)
    z2 = W2 @ h1
    h2 = jnp.sin(z2)
    z3 = W3 @ h2
    d3 = g * jnp.cos(z3)
    d2 = (W3.T @ d3) * jnp.cos(z2)
    d1 = (W2.T @ d2) * jnp.cos(z1)
    return jnp.outer(d1, x), jnp.outer(d2, h1), jnp.outer(d3, h2), W1.T @ d1


net.defvjp(_fwd, _bwd)


def mlp_dots_policy(W1, W2, W3, x):
    return net(W1, W2, W3, x)
