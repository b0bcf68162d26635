# expect: WRONG_ANSWER
# relu in the MLP where the block has tanh
import jax
import jax.numpy as jnp


def attention_block(params, x):
    def block(params, x):
        wq, wk, wv, wo, w1, w2 = params
        p = jax.nn.softmax((x @ wq) @ (x @ wk).T * (x.shape[1] ** -0.5), axis=-1)
        y = x + (p @ (x @ wv)) @ wo
        return y + jax.nn.relu(y @ w1) @ w2

    return jax.checkpoint(block)(params, x)
