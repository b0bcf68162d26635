# expect: WRONG_GRADIENT
# The value is right, but w1 is behind stop_gradient, so its gradient is zero.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    def net(w1, w2, x):
        a = checkpoint_name(jnp.tanh(x @ jax.lax.stop_gradient(w1)), "act")
        return jnp.sum(jnp.sin(a @ w2))

    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.dots_with_no_batch_dims_saveable, cp.save_only_these_names("act"))
    return jax.checkpoint(net, policy=policy)(w1, w2, x)
