# expect: WRONG_POLICY
# dots_saveable keeps every matmul output, 589,824 bytes: it fitted the old budget of 600,000 (recomputing only the softmax), not today's 560,000, below what recomputing nothing needs (held out: written apart from the package)
import jax
import jax.numpy as jnp


def _block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    q, k, v = x @ wq, x @ wk, x @ wv
    s = (q @ k.T) * (x.shape[1] ** -0.5)
    p = jax.nn.softmax(s, axis=-1)
    y = x + (p @ v) @ wo
    return y + jnp.tanh(y @ w1) @ w2


def attention_block(params, x):
    return jax.checkpoint(_block, policy=jax.checkpoint_policies.dots_saveable)(params, x)
