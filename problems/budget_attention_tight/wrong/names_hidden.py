# expect: WRONG_POLICY
# the MLP's hidden pre-activation, (T, h): 131,072 bytes, over the budget
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    q = checkpoint_name(x @ wq, "q")
    k = checkpoint_name(x @ wk, "k")
    v = checkpoint_name(x @ wv, "v")
    s = checkpoint_name((q @ k.T) * (x.shape[1] ** -0.5), "scores")
    p = jax.nn.softmax(s, axis=-1)
    a = checkpoint_name(p @ v, "attended")
    y = checkpoint_name(x + a @ wo, "y")
    hidden = checkpoint_name(y @ w1, "hidden")
    return y + jnp.tanh(hidden) @ w2


def attention_block(params, x):
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    return jax.checkpoint(_block, policy=policy)(params, x)
