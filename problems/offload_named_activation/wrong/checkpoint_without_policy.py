# expect: WRONG_POLICY
# Wraps the network but gives no policy: only the arguments are kept, a is recomputed.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    def network(W1, W2, x):
        a = checkpoint_name(jnp.sin(x @ W1), "a")
        return jnp.sin(a @ W2)

    return jax.checkpoint(network)(W1, W2, x)
