# expect: WRONG_POLICY
# Names relu(x @ w1) (the activation) instead of x @ w1, and h @ w2, and saves them with
# save_only_these_names: the same shapes as the dots policy, but the first saved f32[N, d] is the
# activation, and the backward pass runs x @ w1 again to rebuild relu's mask.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(jax.nn.relu(x @ w1), "h")
        y = checkpoint_name(h @ w2, "y")
        return jnp.sum(y ** 2)

    policy = jax.checkpoint_policies.save_only_these_names("h", "y")
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
