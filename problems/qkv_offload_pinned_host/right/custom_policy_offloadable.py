# expect: ACCEPTED
# Style: a hand-written policy that answers Offloadable for q, k and v, Saveable for the output
# projection and Recompute for everything else; jax.remat as the decorator.
from functools import partial

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import Offloadable, Recompute, Saveable, checkpoint_name

TO_HOST = Offloadable(src="device", dst="pinned_host")


def qkv_to_host(prim, *avals, **params):
    if prim.name != "name":
        return Recompute
    if params["name"] in ("query_proj", "key_proj", "value_proj"):
        return TO_HOST
    return Saveable if params["name"] == "out_proj" else Recompute


@partial(jax.remat, policy=qkv_to_host)
def qkv_offload_pinned_host(params, x):
    q, k, v = (checkpoint_name(jnp.einsum("btd,dhe->bthe", x, params[n]), f"{n}_proj")
               for n in ("query", "key", "value"))
    logits = jnp.einsum("bqhe,bkhe->bhqk", q * jax.lax.rsqrt(jnp.asarray(q.shape[-1], q.dtype)), k)
    weights = jnp.exp(logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True))
    h = x + checkpoint_name(jnp.einsum("bhqk,bkhe,hed->bqd", weights, v, params["out"]), "out_proj")
    centred = h - h.mean(axis=-1, keepdims=True)
    return centred / jnp.sqrt(jnp.mean(centred * centred, axis=-1, keepdims=True) + 1e-6)
