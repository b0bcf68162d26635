import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def fsdp_regather(ws, x):
    """ws: a list of three float32 weights, used as h @ W:
        ws[0]: [d, h1]    ws[1]: [h1, h2]    ws[2]: [h2, h3]
    each split by rows over the mesh axis "fsdp" (4 devices): P("fsdp", None).
    x: float32[B, d], the batch split over "fsdp": P("fsdp", None).

    Computes a1 = tanh(x @ W1), a2 = tanh(a1 @ W2), y = tanh(a2 @ W3) and returns y, float32[B, h3].

    Runs with the mesh set (jax.set_mesh), so jax.shard_map needs no mesh argument and
    with_sharding_constraint takes a bare PartitionSpec. Checkpoint each layer with its weight
    all-gathered INSIDE the checkpoint: each device keeps only its weight shards and its activation
    shards (x, a1, a2), and the backward pass gathers each weight again.
    """
    raise NotImplementedError
