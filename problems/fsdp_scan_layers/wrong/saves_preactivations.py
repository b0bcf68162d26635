# expect: WRONG_POLICY
# Names the pre-activation h @ W and saves it (save_only_these_names) on top of the carries: one
# more [L, B/4, d] stack per device, so the backward pass skips one matmul per layer.
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


def _layer(h, w_shard):
    w = jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)
    return jnp.tanh(checkpoint_name(h @ w, "preact")), None


def fsdp_scan_layers(ws, x):
    body = jax.checkpoint(_layer, policy=jax.checkpoint_policies.save_only_these_names("preact"))

    def per_device(ws, h):
        return jax.lax.scan(body, h, ws)[0]

    return jax.shard_map(per_device, in_specs=(P(None, "fsdp"), P("fsdp")), out_specs=P("fsdp"))(ws, x)
