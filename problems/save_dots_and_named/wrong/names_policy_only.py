# expect: WRONG_POLICY
# Only save_only_these_names('act'): the matmul outputs are recomputed (no f32[N, o], one f32[N, h]).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    def net(w1, w2, x):
        a = checkpoint_name(jnp.tanh(x @ w1), "act")
        return jnp.sum(jnp.sin(a @ w2))

    return jax.checkpoint(net, policy=jax.checkpoint_policies.save_only_these_names("act"))(w1, w2, x)
