# expect: WRONG_POLICY
# Only dots_with_no_batch_dims_saveable: the named activation is not saved (one f32[N, h], not two).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_dots_and_named(w1, w2, x):
    def net(w1, w2, x):
        a = checkpoint_name(jnp.tanh(x @ w1), "act")
        return jnp.sum(jnp.sin(a @ w2))

    return jax.checkpoint(net, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)(w1, w2, x)
