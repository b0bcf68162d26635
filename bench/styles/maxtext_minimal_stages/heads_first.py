# expect: ACCEPTED
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

NAMES = ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo")


def _block(p, x):
    att, mlp = p["attention"], p["mlp"]
    q = checkpoint_name(jnp.einsum("btd,dhe->bhte", x, att["query"]), "query_proj")
    k = checkpoint_name(jnp.einsum("btd,dhe->bhte", x, att["key"]), "key_proj")
    v = checkpoint_name(jnp.einsum("btd,dhe->bhte", x, att["value"]), "value_proj")
    scores = jnp.einsum("bhqe,bhke->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    probs = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("bhqk,bhke->bhqe", probs, v)
    h = x + checkpoint_name(jnp.einsum("bhqe,hed->bqd", ctx, att["out"]), "out_proj")
    u = checkpoint_name(jnp.einsum("btd,df->btf", h, mlp["wi"]), "mlpwi")
    return h + checkpoint_name(jnp.einsum("btf,fd->btd", jax.nn.gelu(u), mlp["wo"]), "mlpwo")


def maxtext_minimal_stages(params, x):
    policy = jax.checkpoint_policies.save_only_these_names(*NAMES)
    return jax.vmap(jax.checkpoint(_block, policy=policy))(params, x)
