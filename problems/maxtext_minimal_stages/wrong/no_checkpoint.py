# expect: WRONG_POLICY
# The names are there but no jax.checkpoint: autodiff keeps what the plain block needs, the
# softmax, the residual stream and the gelu's intermediates among them.
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
    return jax.vmap(_block)(params, x)
