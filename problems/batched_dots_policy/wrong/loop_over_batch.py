# expect: WRONG_POLICY
# A Python loop of unbatched matmuls under dots_with_no_batch_dims_saveable: right values, but it
# saves B separate f32[M, P] blocks instead of one f32[B, M, P].
import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    def loss(x, w):
        return sum(jnp.sum(jnp.tanh(x[b] @ w[b]) ** 2) for b in range(x.shape[0]))

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(loss, policy=policy)(x, w)
