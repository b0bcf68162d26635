# expect: WRONG_POLICY
# Training mode is checkpointed correctly, but the evaluation branch uses a hand-written VJP that
# saves its output t = tanh(x) ("the derivative is 1 - t**2") instead of x: one f32[N], the right
# shape, but a different value, so the evaluation cases fail.
from functools import partial

import jax
import jax.numpy as jnp


@jax.custom_vjp
def _tanh_saving_output(x):
    return jnp.tanh(x)


def _tanh_fwd(x):
    t = jnp.tanh(x)
    return t, t


def _tanh_bwd(t, g):
    return (g * (1.0 - t * t),)


_tanh_saving_output.defvjp(_tanh_fwd, _tanh_bwd)


@partial(jax.checkpoint, static_argnums=(1,))
def _train(x, is_training):
    return jnp.tanh(x) * jax.nn.sigmoid(x)


def static_branch_remat(x, is_training):
    if is_training:
        return _train(x, True)
    return _tanh_saving_output(x)
