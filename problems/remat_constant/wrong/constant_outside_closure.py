# expect: WRONG_POLICY
# a is computed outside the checkpointed function and closed over: the checkpoint cannot rebuild
# it, so it is saved.
import jax
import jax.numpy as jnp


def remat_constant(x):
    a = jnp.sin(jnp.arange(x.shape[0], dtype=jnp.float32)) ** 2
    return jax.checkpoint(lambda v: a * v)(x)
