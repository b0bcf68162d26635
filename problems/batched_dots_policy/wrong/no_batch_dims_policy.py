# expect: WRONG_POLICY
# dots_with_no_batch_dims_saveable refuses the einsum's dot_general because it has a batch
# dimension: only the arguments are saved and the matmul runs again in the backward pass.
import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    def loss(x, w):
        return jnp.sum(jnp.tanh(jnp.einsum("bmk,bkp->bmp", x, w)) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(loss, policy=policy)(x, w)
