# expect: ACCEPTED
# Style: jax.remat alias around a vmapped jnp.dot (vmap gives the dot_general its batch dimension,
# and dots_saveable accepts it); the sum of squares as jnp.vdot(t, t), another summation order.
import jax
import jax.numpy as jnp


def batched_dots_policy(x, w):
    def loss(x, w):
        t = jnp.tanh(jax.vmap(jnp.dot)(x, w))
        return jnp.vdot(t, t)

    return jax.remat(loss, policy=jax.checkpoint_policies.dots_saveable)(x, w)
