# expect: ACCEPTED
# score: below 1
# one plain checkpoint: the arguments kept, the whole block recomputed
import jax
import jax.numpy as jnp


def attention_block(params, x):
    def block(params, x):
        wq, wk, wv, wo, w1, w2 = params
        p = jax.nn.softmax((x @ wq) @ (x @ wk).T / jnp.sqrt(jnp.float32(x.shape[1])), axis=-1)
        y = x + (p @ (x @ wv)) @ wo
        return y + jnp.tanh(y @ w1) @ w2

    return jax.checkpoint(block)(params, x)
