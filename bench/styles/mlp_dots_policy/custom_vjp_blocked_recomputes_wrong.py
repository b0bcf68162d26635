# expect: WRONG_POLICY
# a hand-written VJP that saves the policy's pre-activations, then computes them again in the
# backward pass; its forward products are blocked (two column blocks, a dearer forward by one add
# per product): forward work of its own that must not excuse recomputing what the policy saves
import jax
import jax.numpy as jnp


def _mv(W, v):
    b = max(1, W.shape[1] // 2)
    return sum(W[:, i:i + b] @ v[i:i + b] for i in range(0, W.shape[1], b))


@jax.custom_vjp
def network(W1, W2, W3, x):
    return jnp.sin(_mv(W3, jnp.sin(_mv(W2, jnp.sin(_mv(W1, x))))))


def fwd(W1, W2, W3, x):
    z1 = _mv(W1, x)
    z2 = _mv(W2, jnp.sin(z1))
    z3 = _mv(W3, jnp.sin(z2))
    return jnp.sin(z3), (W1, W2, W3, x, z1, z2, z3)


def bwd(res, g):
    W1, W2, W3, x, _, _, _ = res
    z1 = _mv(W1, x)
    h1 = jnp.sin(z1)
    z2 = _mv(W2, h1)
    h2 = jnp.sin(z2)
    z3 = _mv(W3, h2)
    g3 = g * jnp.cos(z3)
    g2 = (W3.T @ g3) * jnp.cos(z2)
    g1 = (W2.T @ g2) * jnp.cos(z1)
    return jnp.outer(g1, x), jnp.outer(g2, h1), jnp.outer(g3, h2), W1.T @ g1


network.defvjp(fwd, bwd)


def mlp_dots_policy(W1, W2, W3, x):
    return network(W1, W2, W3, x)
