import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def maxtext_minimal_stages(params, x):
    """params: a dict of two dicts, every leaf stacked over the S pipeline stages (float32):
        params["attention"]["query"]: [S, d, H, e]
        params["attention"]["key"]:   [S, d, H, e]
        params["attention"]["value"]: [S, d, H, e]
        params["attention"]["out"]:   [S, H, e, d]
        params["mlp"]["wi"]:          [S, d, f]
        params["mlp"]["wo"]:          [S, f, d]
    x: float32[S, B, T, d], the activations of each stage.

    Stage s applies one transformer block, with its own parameters (the leaves' slice s), to its
    own activations x[s] of shape [B, T, d]:
        q, k, v = x @ query, x @ key, x @ value            (each [B, T, H, e], contracting d)
        probs   = softmax over the keys of (q . k) / sqrt(e)   ([B, H, T, T])
        h       = x + (probs @ v) @ out                   (contracting the keys, then H and e)
        y       = h + gelu(h @ wi) @ wo                   (jax.nn.gelu, its default form)
    Returns y of every stage, float32[S, B, T, d].

    Write the block for one stage, name its six projections with checkpoint_name ("query_proj",
    "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo"), checkpoint it with
    save_only_these_names over those names, and jax.vmap it over the stages.
    """
    raise NotImplementedError
