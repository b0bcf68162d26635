# expect: OUTPUT_LIMIT_EXCEEDED
# Prints far more than the output limit while being traced.
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    for _ in range(100_000):
        print("debugging " * 20)
    return jnp.sum(x)
