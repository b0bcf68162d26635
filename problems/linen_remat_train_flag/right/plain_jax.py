# expect: ACCEPTED
# Style: plain JAX, no Flax: jax.checkpoint over a function of the parameter dict, x and the flag,
# with static_argnums=(2,) (no `self` here) and the same named policy.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@partial(
    jax.checkpoint,
    static_argnums=(2,),
    policy=jax.checkpoint_policies.save_only_these_names("pre"),
)
def _block(params, x, train):
    d0, d1 = params["Dense_0"], params["Dense_1"]
    z = checkpoint_name(x @ d0["kernel"] + d0["bias"], "pre")
    a = jnp.tanh(z)
    if train:
        a = a + 0.1 * z
    return x + (a @ d1["kernel"] + d1["bias"])


def linen_remat_train_flag(params, x, train):
    return _block(params, x, train)
