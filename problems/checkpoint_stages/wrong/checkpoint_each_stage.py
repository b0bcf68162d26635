# expect: WRONG_POLICY
# Checkpoints every stage on its own: the output of each checkpointed stage is saved as the next
# one's input (x, f1(x), f2(f1(x)): 3 x f32[N]).
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    return jax.checkpoint(f3)(jax.checkpoint(f2)(jax.checkpoint(f1)(x)))
