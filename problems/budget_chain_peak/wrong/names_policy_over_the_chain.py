# expect: WRONG_POLICY
# budget_uneven_chain's optimum (keep the four narrow products) as one names policy over the whole
# chain: few residuals, but in program order the backward pass rebuilds both wide products before
# it differentiates anything, so it peaks where no checkpoint does
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def chain_peak(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    policy = jax.checkpoint_policies.save_only_these_names("z1", "z2", "z4", "z5")
    return jax.checkpoint(layers, policy=policy)(ws, x)
