# expect: ACCEPTED
# Style: jax.remat alias, a loop over (weight, name) pairs, row-vector layout h @ W.T.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_named_layer(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        h = x
        for W, name in ((W1, "a"), (W2, "b"), (W3, "c")):
            h = checkpoint_name(jnp.sin(h @ W.T), name)
        return h

    policy = jax.checkpoint_policies.save_only_these_names("a")
    return jax.remat(network, policy=policy)(W1, W2, W3, x)
