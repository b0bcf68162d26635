# expect: ACCEPTED
# Style: an explicit lax.dot_general with batch dimension 0, its output named with checkpoint_name
# and saved with save_only_these_names: the same value dots_saveable saves.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def batched_dots_policy(x, w):
    def loss(x, w):
        # contract x's axis 2 with w's axis 1; axis 0 of both is the batch dimension
        y = jax.lax.dot_general(x, w, (((2,), (1,)), ((0,), (0,))))
        y = checkpoint_name(y, "y")
        return jnp.sum(jnp.tanh(y) ** 2)

    policy = jax.checkpoint_policies.save_only_these_names("y")
    return jax.checkpoint(loss, policy=policy)(x, w)
