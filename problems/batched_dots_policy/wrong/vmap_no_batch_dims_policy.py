# expect: WRONG_POLICY
# Checkpoints a per-example function with dots_with_no_batch_dims_saveable and vmaps it: vmap
# gives the matmul a batch dimension, so the policy refuses it and nothing but the arguments is saved.
import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    def per_example(xb, wb):
        return jnp.tanh(xb @ wb) ** 2

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jnp.sum(jax.vmap(jax.checkpoint(per_example, policy=policy))(x, w))
