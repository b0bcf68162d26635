# expect: WRONG_POLICY
# the textbook "every other layer" keeps z1, z3, z5: z3 is wide, and the three are over the budget
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            h = jnp.tanh(checkpoint_name(h @ w, f"z{i}"))
        return h

    return jax.checkpoint(layers, policy=jax.checkpoint_policies.save_only_these_names("z1", "z3", "z5"))(ws, x)
