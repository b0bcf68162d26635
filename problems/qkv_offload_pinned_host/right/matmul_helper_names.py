# expect: ACCEPTED
# Style: @ matmuls with the heads folded into the kernels' columns, a helper that projects and
# names, and the policy built once at module level from two name lists.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

ON_DEVICE = ("out_proj",)
TO_HOST = ("query_proj", "key_proj", "value_proj")
POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=ON_DEVICE, names_which_can_be_offloaded=TO_HOST,
    offload_src="device", offload_dst="pinned_host")


def project(x, kernel, name):
    d, heads, width = kernel.shape
    return checkpoint_name((x @ kernel.reshape(d, heads * width)).reshape(*x.shape[:-1], heads, width), name)


def block(params, x):
    q, k, v = (project(x, params[n], n + "_proj") for n in ("query", "key", "value"))
    scores = jnp.swapaxes(q, 1, 2) @ jnp.moveaxis(k, 1, -1) / jnp.sqrt(q.shape[-1]).astype(x.dtype)
    ctx = jnp.swapaxes(jax.nn.softmax(scores, axis=-1) @ jnp.swapaxes(v, 1, 2), 1, 2)
    heads, width, d = params["out"].shape
    h = x + checkpoint_name(ctx.reshape(*ctx.shape[:2], heads * width) @ params["out"].reshape(heads * width, d), "out_proj")
    mu = jnp.mean(h, axis=-1, keepdims=True)
    return (h - mu) / jnp.sqrt(jnp.var(h, axis=-1, keepdims=True) + 1e-6)


def qkv_offload_pinned_host(params, x):
    return jax.checkpoint(block, policy=POLICY)(params, x)
