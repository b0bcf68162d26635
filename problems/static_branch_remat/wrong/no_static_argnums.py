# expect: RUNTIME_ERROR
# jax.checkpoint without static_argnums traces is_training too, so `if is_training:` fails
# (TracerBoolConversionError).
import jax
import jax.numpy as jnp


@jax.checkpoint
def static_branch_remat(x, is_training):
    if is_training:
        return jnp.tanh(x) * jax.nn.sigmoid(x)
    return jnp.tanh(x)
