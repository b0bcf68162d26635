# expect: WRONG_POLICY
# The names without jax.checkpoint: autodiff keeps q, k, v, the softmax and the layer norm's
# intermediates, all on the device.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _block(p, x):
    q = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, p["query"]), "query_proj")
    k = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, p["key"]), "key_proj")
    v = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, p["value"]), "value_proj")
    scores = jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    ctx = jnp.einsum("bhqk,bkhe->bqhe", jax.nn.softmax(scores, axis=-1), v)
    h = x + checkpoint_name(jnp.einsum("bqhe,hed->bqd", ctx, p["out"]), "out_proj")
    mean = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(var + 1e-6)


def qkv_offload_pinned_host(params, x):
    return _block(params, x)
