# expect: WRONG_POLICY
# the best policy of a residual budget (keep the six narrow products) as one names policy over the
# whole chain: few residuals, but in program order the backward pass rebuilds every wide product
# before it differentiates anything, so it peaks where no checkpoint does
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def chain_peak(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    policy = jax.checkpoint_policies.save_only_these_names(*(f"z{i}" for i in range(1, len(ws), 2)))
    return jax.checkpoint(layers, policy=policy)(ws, x)
