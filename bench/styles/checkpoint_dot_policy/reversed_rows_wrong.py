# expect: WRONG_POLICY
# the saved product's rows reversed: same numbers, another value
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        z = checkpoint_name((x[::-1] @ w1), "z")
        h = jax.nn.relu(z[::-1])
        y = checkpoint_name(h @ w2, "y")
        return jnp.sum(y ** 2)

    policy = jax.checkpoint_policies.save_only_these_names("z", "y")
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
