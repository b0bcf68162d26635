# expect: ACCEPTED
# f2 written as exp2(cos(u) * log2 e): the same values saved; its backward pass holds one more f32[N]
# temporary (exp2's derivative) than the reference's, within the calibrated peak slack.
import math
import jax
import jax.numpy as jnp


def f1(x):
    return jnp.sin(x) * x


def f2(u):
    return jnp.exp2(jnp.cos(u) * math.log2(math.e))


def f3(x):
    return jnp.tanh(x) ** 2


def checkpoint_stages(x):
    return f3(jax.checkpoint(lambda v: f2(f1(v)))(x))
