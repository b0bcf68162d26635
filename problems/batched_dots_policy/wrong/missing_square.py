# expect: WRONG_ANSWER
# Forgets the square: sums tanh of the batched matmul, under the right policy.
import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    def loss(x, w):
        return jnp.sum(jnp.tanh(jnp.einsum("bmk,bkp->bmp", x, w)))

    return jax.checkpoint(loss, policy=jax.checkpoint_policies.dots_saveable)(x, w)
