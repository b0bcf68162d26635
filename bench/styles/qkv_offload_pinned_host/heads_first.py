# expect: ACCEPTED
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def _block(p, x):
    q = checkpoint_name(jnp.einsum("btd,dhe->bhte", x, p["query"]), "query_proj")
    k = checkpoint_name(jnp.einsum("btd,dhe->bhte", x, p["key"]), "key_proj")
    v = checkpoint_name(jnp.einsum("btd,dhe->bhte", x, p["value"]), "value_proj")
    scores = jnp.einsum("bhqe,bhke->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    ctx = jnp.einsum("bhqk,bhke->bqhe", jax.nn.softmax(scores, axis=-1), v)
    h = x + checkpoint_name(jnp.einsum("bqhe,hed->bqd", ctx, p["out"]), "out_proj")
    mean = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(var + 1e-6)


def qkv_offload_pinned_host(params, x):
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=["out_proj"],
        names_which_can_be_offloaded=["query_proj", "key_proj", "value_proj"],
        offload_src="device", offload_dst="pinned_host")
    return jax.checkpoint(_block, policy=policy)(params, x)
