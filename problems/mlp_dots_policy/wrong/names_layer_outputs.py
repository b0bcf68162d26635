# expect: WRONG_POLICY
# Names and saves the first two layer OUTPUTS sin(W1 x), sin(W2 a) instead of the matmul outputs
# (plus W3 b): the shapes are the reference's (f32[h1], f32[h2], f32[h3]), but the backward pass
# runs W1 @ x and W2 @ a again to get the cosines.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def mlp_dots_policy(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        a = checkpoint_name(jnp.sin(W1 @ x), "a")
        b = checkpoint_name(jnp.sin(W2 @ a), "b")
        return jnp.sin(checkpoint_name(W3 @ b, "z3"))

    policy = jax.checkpoint_policies.save_only_these_names("a", "b", "z3")
    return jax.checkpoint(network, policy=policy)(W1, W2, W3, x)
