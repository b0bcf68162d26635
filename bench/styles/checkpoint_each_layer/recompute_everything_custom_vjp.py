# expect: WRONG_POLICY
import jax
import jax.numpy as jnp


@jax.custom_vjp
def net(W1, W2, W3, x):
    return jnp.sin(W3 @ jnp.sin(W2 @ jnp.sin(W1 @ x)))


def fwd(W1, W2, W3, x):
    h1 = jnp.sin(W1 @ x)
    h2 = jnp.sin(W2 @ h1)
    return jnp.sin(W3 @ h2), (W1, W2, W3, x, h1, h2)


def bwd(res, g):
    W1, W2, W3, x, _, _ = res
    h1 = jnp.sin(W1 @ x)
    h2 = jnp.sin(W2 @ h1)
    z3 = W3 @ h2
    g3 = g * jnp.cos(z3)
    gW3 = jnp.outer(g3, h2)
    gh2 = W3.T @ g3
    g2 = gh2 * jnp.cos(W2 @ h1)
    gW2 = jnp.outer(g2, h1)
    gh1 = W2.T @ g2
    g1 = gh1 * jnp.cos(W1 @ x)
    return jnp.outer(g1, x), gW2, gW3, W1.T @ g1


net.defvjp(fwd, bwd)


def checkpoint_each_layer(W1, W2, W3, x):
    return net(W1, W2, W3, x)
