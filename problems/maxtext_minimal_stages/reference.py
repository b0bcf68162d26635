"""Reference solution of maxtext_minimal_stages. Never served, never mounted into a jail."""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

MINIMAL = ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo")


def _block(p, x):
    att, mlp = p["attention"], p["mlp"]
    q = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, att["query"]), "query_proj")
    k = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, att["key"]), "key_proj")
    v = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, att["value"]), "value_proj")
    scores = jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    probs = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("bhqk,bkhe->bqhe", probs, v)
    h = x + checkpoint_name(jnp.einsum("bqhe,hed->bqd", ctx, att["out"]), "out_proj")
    u = checkpoint_name(jnp.einsum("btd,df->btf", h, mlp["wi"]), "mlpwi")
    return h + checkpoint_name(jnp.einsum("btf,fd->btd", jax.nn.gelu(u), mlp["wo"]), "mlpwo")


def maxtext_minimal_stages(params, x):
    policy = jax.checkpoint_policies.save_only_these_names(*MINIMAL)
    return jax.vmap(jax.checkpoint(_block, policy=policy))(params, x)
