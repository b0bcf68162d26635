# expect: WRONG_POLICY
# The last sin is applied outside the checkpoint: autodiff keeps cos(W3 b) for it, and inside the
# checkpoint W3 b is no longer needed. Same shapes as the reference (one f32[h3]), but the saved
# f32[h3] is a cosine, not the matmul output.
import jax
import jax.numpy as jnp


def mlp_dots_policy(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        h = jnp.sin(W1 @ x)
        h = jnp.sin(W2 @ h)
        return W3 @ h

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jnp.sin(jax.checkpoint(network, policy=policy)(W1, W2, W3, x))
