# expect: WRONG_POLICY
# The checkpoint ends at a @ w2; the sin and the sum come after it. Autodiff keeps cos(a @ w2) for
# the sin outside, and inside nothing needs a @ w2 any more: the shapes are the reference's (one
# f32[N, o]), but it holds the cosine, not the matmul output.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    def net(w1, w2, x):
        a = checkpoint_name(jnp.tanh(x @ w1), "act")
        return a @ w2

    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.dots_with_no_batch_dims_saveable, cp.save_only_these_names("act"))
    return jnp.sum(jnp.sin(jax.checkpoint(net, policy=policy)(w1, w2, x)))
