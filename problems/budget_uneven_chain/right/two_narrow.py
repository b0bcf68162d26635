# expect: ACCEPTED
# score: below 1
# fits easily but keeps only two of the four narrow values the budget allows: more recomputed
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    return jax.checkpoint(layers, policy=jax.checkpoint_policies.save_only_these_names("z2", "z5"))(ws, x)
