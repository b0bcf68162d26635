# expect: WRONG_POLICY
# The plain chain: autodiff saves one cosine per sin, 16 vectors in all.
import jax.numpy as jnp


def sin_chain_recursive(x):
    for _ in range(16):
        x = jnp.sin(x)
    return x
