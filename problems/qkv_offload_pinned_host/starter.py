import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def qkv_offload_pinned_host(params, x):
    """params: a dict of four float32 arrays:
        params["query"]: [d, H, e]
        params["key"]:   [d, H, e]
        params["value"]: [d, H, e]
        params["out"]:   [H, e, d]
    x: float32[B, T, d].

    Computes one attention block with a post layer norm:
        q, k, v = x @ query, x @ key, x @ value              (each [B, T, H, e], contracting d)
        probs   = softmax over the keys of (q . k) / sqrt(e)   ([B, H, T, T])
        h       = x + (probs @ v) @ out                     (contracting the keys, then H and e)
        y       = (h - mean(h)) / sqrt(var(h) + 1e-6)       (mean and variance over d)
    Returns y, float32[B, T, d].

    Name q, k, v and the output projection with checkpoint_name ("query_proj", "key_proj",
    "value_proj", "out_proj") and wrap the block in one jax.checkpoint whose policy offloads q, k
    and v to "pinned_host", keeps "out_proj" on the device and recomputes everything else.
    """
    raise NotImplementedError
