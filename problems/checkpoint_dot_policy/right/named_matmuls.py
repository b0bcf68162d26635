# expect: ACCEPTED
# Style: names exactly the two matmul outputs with checkpoint_name and saves them with
# save_only_these_names: the same values the dots policy saves.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        z = checkpoint_name(x @ w1, "z")
        y = checkpoint_name(jnp.where(z > 0, z, 0.0) @ w2, "y")
        return jnp.sum(y * y)

    policy = jax.checkpoint_policies.save_only_these_names("z", "y")
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
