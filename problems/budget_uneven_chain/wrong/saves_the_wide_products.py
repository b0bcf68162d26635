# expect: WRONG_POLICY
# keeps the two wide (B, D) pre-activations: 262,144 bytes more than the arguments, over the budget
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    return jax.checkpoint(layers, policy=jax.checkpoint_policies.save_only_these_names("z0", "z3"))(ws, x)
