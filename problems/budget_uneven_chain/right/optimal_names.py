# expect: ACCEPTED
# score: 1.0
# the four narrow pre-activations, named in a loop: what the optimum keeps within the budget
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def uneven_chain(ws, x):
    def layers(ws, x):
        h = x
        for i, w in enumerate(ws):
            z = h @ w
            if w.shape[1] == ws[2].shape[1] and i in (1, 2, 4, 5):
                z = checkpoint_name(z, "narrow")
            h = jnp.tanh(z)
        return h

    return jax.checkpoint(layers, policy=jax.checkpoint_policies.save_only_these_names("narrow"))(ws, x)
