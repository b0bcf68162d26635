# expect: ACCEPTED
# score: 1.0
# the attention part and the MLP part checkpointed separately, keeping attended and y (held out: written apart from the package)
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _attention(wq, wk, wv, wo, x):
    q, k, v = x @ wq, x @ wk, x @ wv
    p = jax.nn.softmax(q @ k.T / jnp.sqrt(jnp.float32(q.shape[-1])), axis=-1)
    a = checkpoint_name(p @ v, "attended")
    return x + a @ wo


def _mlp(w1, w2, y):
    return y + jnp.tanh(y @ w1) @ w2


def attention_block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    attn = jax.checkpoint(_attention, policy=jax.checkpoint_policies.save_only_these_names("attended"))
    y = attn(wq, wk, wv, wo, x)
    return jax.checkpoint(_mlp)(w1, w2, y)
