# expect: WRONG_POLICY
# MaxText's old "minimal": dots_with_no_batch_dims_saveable. On one stage it saves the five
# projections, but under the vmap every matmul has the stage as a batch dimension: it saves none.
import jax
import jax.numpy as jnp


def _block(p, x):
    att, mlp = p["attention"], p["mlp"]
    q = jnp.einsum("btd,dhe->bthe", x, att["query"])
    k = jnp.einsum("btd,dhe->bthe", x, att["key"])
    v = jnp.einsum("btd,dhe->bthe", x, att["value"])
    probs = jax.nn.softmax(jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype), axis=-1)
    h = x + jnp.einsum("bqhe,hed->bqd", jnp.einsum("bhqk,bkhe->bqhe", probs, v), att["out"])
    return h + jnp.einsum("btf,fd->btd", jax.nn.gelu(jnp.einsum("btd,df->btf", h, mlp["wi"])), mlp["wo"])


def maxtext_minimal_stages(params, x):
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.vmap(jax.checkpoint(_block, policy=policy))(params, x)
