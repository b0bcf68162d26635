# expect: ACCEPTED
# Style: jax.remat alias, dots_saveable (the same as the no-batch-dims policy here: no batched
# matmuls), the final sum written as row sums, then their sum.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    def net(w1, w2, x):
        a = checkpoint_name(jnp.tanh(jnp.dot(x, w1)), name="act")
        return jnp.sin(jnp.dot(a, w2)).sum(axis=1).sum()

    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("act"))
    return jax.remat(net, policy=policy)(w1, w2, x)
