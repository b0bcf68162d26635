# expect: ACCEPTED
# Style: plain global code under jax.remat with dots_saveable: the only dot output the backward
# pass needs is x @ W1 (the second dot feeds a sum), and the input shardings make it (data, model).
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.remat, policy=jax.checkpoint_policies.dots_saveable)
def tensor_parallel_mlp(x, w1, w2):
    return x + jnp.tanh(jnp.dot(x, w1)) @ w2
