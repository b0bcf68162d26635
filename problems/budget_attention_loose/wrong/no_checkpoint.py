# expect: WRONG_POLICY
# no checkpoint: autodiff keeps every intermediate, over the budget
import jax
import jax.numpy as jnp


def attention_block(params, x):
    wq, wk, wv, wo, w1, w2 = params
    p = jax.nn.softmax((x @ wq) @ (x @ wk).T * (x.shape[1] ** -0.5), axis=-1)
    y = x + (p @ (x @ wv)) @ wo
    return y + jnp.tanh(y @ w1) @ w2
