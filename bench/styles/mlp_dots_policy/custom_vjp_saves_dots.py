# expect: ACCEPTED
import jax
import jax.numpy as jnp


@jax.custom_vjp
def network(W1, W2, W3, x):
    return jnp.sin(W3 @ jnp.sin(W2 @ jnp.sin(W1 @ x)))


def fwd(W1, W2, W3, x):
    z1 = W1 @ x
    h1 = jnp.sin(z1)
    z2 = W2 @ h1
    h2 = jnp.sin(z2)
    z3 = W3 @ h2
    return jnp.sin(z3), (W1, W2, W3, x, z1, z2, z3)


def bwd(res, g):
    W1, W2, W3, x, z1, z2, z3 = res
    h1, h2 = jnp.sin(z1), jnp.sin(z2)
    g3 = g * jnp.cos(z3)
    g2 = (W3.T @ g3) * jnp.cos(z2)
    g1 = (W2.T @ g2) * jnp.cos(z1)
    return jnp.outer(g1, x), jnp.outer(g2, h1), jnp.outer(g3, h2), W1.T @ g1


network.defvjp(fwd, bwd)


def mlp_dots_policy(W1, W2, W3, x):
    return network(W1, W2, W3, x)
