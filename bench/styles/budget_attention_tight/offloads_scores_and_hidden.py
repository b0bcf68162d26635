# expect: WRONG_POLICY
# keeps attended and y on the device and offloads the scores and the hidden layer to pinned_host: offloaded bytes count against a residual budget, 491,520 in large (held out: written apart from the package)
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    q = x @ wq
    k = x @ wk
    v = x @ wv
    s = checkpoint_name((q @ k.T) * (x.shape[1] ** -0.5), "scores")
    p = jax.nn.softmax(s, axis=-1)
    a = checkpoint_name(p @ v, "attended")
    y = checkpoint_name(x + a @ wo, "y")
    hidden = checkpoint_name(y @ w1, "hidden")
    return y + jnp.tanh(hidden) @ w2


def attention_block(params, x):
    pol = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=["attended", "y"],
        names_which_can_be_offloaded=["scores", "hidden"],
        offload_src="device",
        offload_dst="pinned_host",
    )
    return jax.checkpoint(_block, policy=pol)(params, x)
