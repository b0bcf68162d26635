# expect: ACCEPTED
# Style: plain @ matmuls (the heads folded into one axis of the kernel and unfolded before the
# name), a helper that names each projection, and the checkpoint as a decorator on the stage.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

MINIMAL = jax.checkpoint_policies.save_only_these_names(
    "query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo")


def project(x, kernel, name):
    d, heads, width = kernel.shape
    y = x @ kernel.reshape(d, heads * width)
    return checkpoint_name(y.reshape(*x.shape[:-1], heads, width), name)


@partial(jax.checkpoint, policy=MINIMAL)
def stage(p, x):
    att = p["attention"]
    q = project(x, att["query"], "query_proj")
    k = project(x, att["key"], "key_proj")
    v = project(x, att["value"], "value_proj")
    scores = jnp.swapaxes(q, 1, 2) @ jnp.moveaxis(k, 1, -1) / jnp.sqrt(q.shape[-1]).astype(x.dtype)
    ctx = jnp.swapaxes(jax.nn.softmax(scores, axis=-1) @ jnp.swapaxes(v, 1, 2), 1, 2)
    heads, width, d = att["out"].shape
    h = x + checkpoint_name(ctx.reshape(*ctx.shape[:2], heads * width) @ att["out"].reshape(heads * width, d), "out_proj")
    u = checkpoint_name(h @ p["mlp"]["wi"], "mlpwi")
    return h + checkpoint_name(jax.nn.gelu(u) @ p["mlp"]["wo"], "mlpwo")


def maxtext_minimal_stages(params, x):
    return jax.vmap(stage)(params, x)
