# expect: WRONG_POLICY
# Gathers the hidden over `model` (and W2 with it) instead of all-reducing partial sums, and saves
# the gathered hidden: every device keeps f32[B/2, h], twice its own piece, replicated over `model`.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _body(x, w1, w2):
    u = jax.lax.all_gather(x @ w1, "model", axis=1, tiled=True)     # f32[B/2, h] on every device
    u = checkpoint_name(u, "hidden")
    w2_full = jax.lax.all_gather(w2, "model", axis=0, tiled=True)
    return x + jnp.tanh(u) @ w2_full


def tensor_parallel_mlp(x, w1, w2):
    block = jax.checkpoint(_body, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    return jax.shard_map(block, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                         out_specs=P("data", None), check_vma=False)(x, w1, w2)
