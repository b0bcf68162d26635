# expect: ACCEPTED
# Style: jax.remat alias, row-vector layout h @ W.T, the sum of squares as jnp.vdot(r, r).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def loss_save_names_but(params, x, y):
    def loss(params, x, y):
        h = x
        for i, W in enumerate(params[:-1]):
            h = checkpoint_name(jnp.sin(h @ W.T), f"layer{i}_output")
        r = h @ params[-1].T - y
        return jnp.vdot(r, r)

    policy = jax.checkpoint_policies.save_any_names_but_these("layer1_output")
    return jax.remat(loss, policy=policy)(params, x, y)
