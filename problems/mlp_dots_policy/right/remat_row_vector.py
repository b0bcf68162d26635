# expect: ACCEPTED
# Style: jax.remat alias, row-vector layout h @ W.T (the same matrix-vector products written with
# the vector on the left).
import jax
import jax.numpy as jnp


def mlp_dots_policy(W1, W2, W3, x):
    def network(W1, W2, W3, x):
        a = jnp.sin(x @ W1.T)
        b = jnp.sin(a @ W2.T)
        return jnp.sin(b @ W3.T)

    return jax.remat(network, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)(W1, W2, W3, x)
