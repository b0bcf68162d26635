# expect: WRONG_POLICY
# nothing_saveable: only x's piece and the weights are kept, so the backward pass recomputes the
# layer norm and the matmul LN(x) @ W1 before it can differentiate tanh.
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
def sequence_parallel_activations(x, w1, w2):
    mean = x.mean(axis=-1, keepdims=True)
    normed = (x - mean) * jax.lax.rsqrt(jnp.square(x - mean).mean(axis=-1, keepdims=True) + 1e-6)
    return x + jnp.tanh(normed @ w1) @ w2
