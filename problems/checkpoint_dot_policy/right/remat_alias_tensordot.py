# expect: ACCEPTED
# Style: the jax.remat alias with the checkpoint_dots_with_no_batch_dims policy alias; the sum of
# squares is a full contraction jnp.tensordot(y, y, 2) (another summation order than sum(y ** 2)).
import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        y = jnp.dot(jax.nn.relu(jnp.dot(x, w1)), w2)
        return jnp.tensordot(y, y, axes=2)

    pipeline = jax.remat(pipeline, policy=jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims)
    return pipeline(w1, w2, x)
