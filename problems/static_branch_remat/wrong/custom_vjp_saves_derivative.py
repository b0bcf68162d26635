# expect: WRONG_POLICY
# A hand-written VJP (flag static via nondiff_argnums) that saves the derivative dy/dx instead of x:
# one f32[N] in either mode, the right shape, but not the value a checkpoint keeps (its input x).
from functools import partial

import jax
import jax.numpy as jnp


def _plain(x, is_training):
    if is_training:
        return jnp.tanh(x) * jax.nn.sigmoid(x)
    return jnp.tanh(x)


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _act(x, is_training):
    return _plain(x, is_training)


def _act_fwd(x, is_training):
    y, tangent = jax.jvp(lambda v: _plain(v, is_training), (x,), (jnp.ones_like(x),))
    return y, tangent          # elementwise, so the JVP with ones is the derivative


def _act_bwd(is_training, derivative, g):
    return (g * derivative,)


_act.defvjp(_act_fwd, _act_bwd)


def static_branch_remat(x, is_training):
    return _act(x, is_training)
