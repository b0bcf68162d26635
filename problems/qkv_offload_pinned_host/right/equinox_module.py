# expect: ACCEPTED
# Style: an Equinox module holding the four kernels, its __call__ checkpointed with
# eqx.filter_checkpoint and the same offloading policy (the module's arrays are its inputs).
import equinox as eqx
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=["out_proj"],
    names_which_can_be_offloaded=["query_proj", "key_proj", "value_proj"],
    offload_src="device", offload_dst="pinned_host")


class SelfAttention(eqx.Module):
    query: jax.Array
    key: jax.Array
    value: jax.Array
    out: jax.Array

    def __call__(self, x):
        q = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, self.query), "query_proj")
        k = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, self.key), "key_proj")
        v = checkpoint_name(jnp.einsum("btd,dhe->bthe", x, self.value), "value_proj")
        probs = jax.nn.softmax(jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(x.dtype), axis=-1)
        h = x + checkpoint_name(jnp.einsum("bqhe,hed->bqd", jnp.einsum("bhqk,bkhe->bqhe", probs, v), self.out), "out_proj")
        mean = h.mean(axis=-1, keepdims=True)
        return (h - mean) * jax.lax.rsqrt(jnp.square(h - mean).mean(axis=-1, keepdims=True) + 1e-6)


def qkv_offload_pinned_host(params, x):
    module = SelfAttention(**params)
    return eqx.filter_checkpoint(SelfAttention.__call__, policy=POLICY)(module, x)
