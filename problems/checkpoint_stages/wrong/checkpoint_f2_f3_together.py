# expect: WRONG_POLICY
# Checkpoints f3 and f2 as one unit with f1 outside: it saves four f32[N] like the right placement
# (x and f1's sin, cos and product), but its backward pass holds more at once (caught by the peak).
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(x):
    return jnp.exp(jnp.cos(x))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    last_two = jax.checkpoint(lambda v: f3(f2(v)))
    return last_two(f1(x))
