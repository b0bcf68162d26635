# expect: WRONG_POLICY
# Saves the value named "a" with save_only_these_names: the same value of the same shape as the
# reference keeps, but on the device. Only where the residual is kept tells it apart.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def offload_named_activation(W1, W2, x):
    def network(W1, W2, x):
        a = checkpoint_name(jnp.sin(x @ W1), "a")
        return jnp.sin(a @ W2)

    return jax.checkpoint(network, policy=jax.checkpoint_policies.save_only_these_names("a"))(W1, W2, x)
