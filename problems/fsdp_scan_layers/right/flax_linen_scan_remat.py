# expect: ACCEPTED
# Style: Flax linen: nn.scan(nn.remat(Layer)) over a stacked "kernel" param (variable_axes
# {"params": 0}), each layer's kernel being this device's [d/4, d] rows, gathered with all_gather in
# __call__; the params dict is built from ws and applied inside jax.shard_map. (No dataclass fields.)
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


class FSDPTanhLayer(nn.Module):
    @nn.compact
    def __call__(self, h, _):
        d = h.shape[-1]
        w_shard = self.param("kernel", nn.initializers.zeros, (d // jax.lax.axis_size("fsdp"), d))
        w = jax.lax.all_gather(w_shard, "fsdp", axis=0, tiled=True)
        return jnp.tanh(h @ w), None


class Stack(nn.Module):
    @nn.compact
    def __call__(self, h, length):
        scanned = nn.scan(nn.remat(FSDPTanhLayer), variable_axes={"params": 0},
                          split_rngs={"params": False}, length=length)
        h, _ = scanned(name="layers")(h, None)
        return h


def fsdp_scan_layers(ws, x):
    def per_device(ws, h):
        return Stack().apply({"params": {"layers": {"kernel": ws}}}, h, ws.shape[0])

    return jax.shard_map(per_device, in_specs=(P(None, "fsdp", None), P("fsdp", None)), out_specs=P("fsdp", None))(ws, x)
