# expect: WRONG_ANSWER
# the softmax over the wrong axis, within the budget (held out: written apart from the package)
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    q, k, v = x @ wq, x @ wk, x @ wv
    p = jax.nn.softmax((q @ k.T) * (x.shape[1] ** -0.5), axis=0)
    a = checkpoint_name(p @ v, "attended")
    y = checkpoint_name(x + a @ wo, "y")
    return y + jnp.tanh(y @ w1) @ w2


def attention_block(params, x):
    return jax.checkpoint(_block, policy=jax.checkpoint_policies.save_only_these_names("attended", "y"))(params, x)
