# expect: WRONG_POLICY
# The name list leaves out "value_proj": v is not kept and the backward pass recomputes it.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _block(p, x):
    att, mlp = p["attention"], p["mlp"]
    q = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, att["query"]), "query_proj")
    k = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, att["key"]), "key_proj")
    v = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, att["value"]), "value_proj")
    probs = jax.nn.softmax(jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype), axis=-1)
    h = x + checkpoint_name(jnp.einsum("bqhe,hed->bqd", jnp.einsum("bhqk,bkhe->bqhe", probs, v), att["out"]), "out_proj")
    u = checkpoint_name(jnp.einsum("btd,df->btf", h, mlp["wi"]), "mlpwi")
    return h + checkpoint_name(jnp.einsum("btf,fd->btd", jax.nn.gelu(u), mlp["wo"]), "mlpwo")


def maxtext_minimal_stages(params, x):
    policy = jax.checkpoint_policies.save_only_these_names("query_proj", "key_proj", "out_proj", "mlpwi", "mlpwo")
    return jax.vmap(jax.checkpoint(_block, policy=policy))(params, x)
