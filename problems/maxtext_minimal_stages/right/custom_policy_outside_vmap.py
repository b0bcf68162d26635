# expect: ACCEPTED
# Style: a hand-written policy returning jax.ad_checkpoint.Saveable or Recompute for each
# primitive, and jax.checkpoint wrapped around the vmapped block (checkpoint(vmap(...)) rather
# than vmap(checkpoint(...)): a name-based policy keeps the same values either way).
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import Recompute, Saveable, checkpoint_name

KEEP = frozenset({"query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo"})


def minimal_policy(prim, *avals, **params):
    if prim.name == "name" and params.get("name") in KEEP:
        return Saveable
    return Recompute


def block(p, x):
    a, m = p["attention"], p["mlp"]
    q = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, a["query"]), "query_proj")
    k = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, a["key"]), "key_proj")
    v = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, a["value"]), "value_proj")
    logits = jnp.einsum("bqhe,bkhe->bhqk", q, k) * jax.lax.rsqrt(jnp.asarray(q.shape[-1], q.dtype))
    weights = jnp.exp(logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True))
    attended = jnp.einsum("bhqk,bkhe->bqhe", weights, v)
    h = x + checkpoint_name(jnp.einsum("bqhe,hed->bqd", attended, a["out"]), "out_proj")
    hidden = checkpoint_name(jnp.einsum("btd,df->btf", h, m["wi"]), "mlpwi")
    return h + checkpoint_name(jnp.einsum("btf,fd->btd", jax.nn.gelu(hidden), m["wo"]), "mlpwo")


def maxtext_minimal_stages(params, x):
    return jax.checkpoint(jax.vmap(block), policy=minimal_policy)(params, x)
