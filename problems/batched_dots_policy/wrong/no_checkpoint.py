# expect: WRONG_POLICY
# Right math, no jax.checkpoint: autodiff saves tanh's output and two values derived from it
# instead of the matmul output.
import jax.numpy as jnp


def batched_dots_policy(x, w):
    return jnp.sum(jnp.tanh(jnp.einsum("bmk,bkp->bmp", x, w)) ** 2)
