# expect: WRONG_POLICY
# Names x @ w1 instead of tanh's output: that value is a matmul output anyway, so tanh(x @ w1)
# itself is not saved (one f32[N, h], not two).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    def net(w1, w2, x):
        a = jnp.tanh(checkpoint_name(x @ w1, "act"))
        return jnp.sum(jnp.sin(a @ w2))

    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.dots_with_no_batch_dims_saveable, cp.save_only_these_names("act"))
    return jax.checkpoint(net, policy=policy)(w1, w2, x)
