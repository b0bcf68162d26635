# expect: ACCEPTED
# Style: the Python `if` runs outside the checkpoint and picks a function of x alone, which is
# wrapped with the jax.remat alias; the flag never reaches the checkpoint as an argument.
import jax
import jax.numpy as jnp


def static_branch_remat(x, is_training):
    if is_training:
        def act(v):
            return jnp.tanh(v) * jax.nn.sigmoid(v)
    else:
        act = jnp.tanh
    return jax.remat(act)(x)
