# expect: WRONG_POLICY
# a is computed outside and passed to the checkpointed function as an argument: arguments of a
# checkpoint are kept, so a is saved.
import jax
import jax.numpy as jnp


def remat_constant(x):
    a = jnp.sin(jnp.arange(x.shape[0], dtype=jnp.float32)) ** 2
    return jax.checkpoint(lambda a, v: a * v)(a, x)
