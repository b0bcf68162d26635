# expect: ACCEPTED
# Style: names the two matmul outputs as well and saves all three names with one
# save_only_these_names: exactly the values the combined policy saves.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    def net(w1, w2, x):
        z = checkpoint_name(x @ w1, "z")
        a = checkpoint_name(jnp.tanh(z), "act")
        u = checkpoint_name(a @ w2, "u")
        return jnp.sum(jnp.sin(u))

    policy = jax.checkpoint_policies.save_only_these_names("z", "act", "u")
    return jax.checkpoint(net, policy=policy)(w1, w2, x)
