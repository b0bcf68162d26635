"""Hidden inputs placed on a problem's mesh, and the per-device layout of what a program returns:
the verifier's side of a problem with a `[mesh]` (docs/ARCHITECTURE.md, "Problems on a mesh").

The verifier child starts with `jailside.mesh.MAX_DEVICES` simulated CPU devices (the template's
`XLA_FLAGS`, fixed before JAX starts), builds the problem's mesh over the first of them, places each
hidden input with its partition (`jailside.mesh.place`), and reads each residual's layout from the
array the compiled forward program returns: measured with jax 0.10.2, a `jit`-style program's
residual shardings are chosen by XLA's partitioner when it compiles, so only the compiled program
says what each device keeps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jailside.mesh import make_mesh, place

_MESHES: dict[str, Any] = {}  # one Mesh per MeshDict in this process (a verifier child judges one problem)


def mesh_of(spec: dict[str, Any]) -> Any:
    """The `jax.sharding.Mesh` of a MeshDict, built once per process.

    Raises:
        jailside.mesh.MeshUnavailable: the process has fewer devices than the mesh needs.
    """
    key = json.dumps(spec, sort_keys=True)
    if key not in _MESHES:
        _MESHES[key] = make_mesh(spec)
    return _MESHES[key]


def placed(leaves: Sequence[np.ndarray], spec: dict[str, Any], names: Sequence[str]) -> list[Any]:
    """The input leaves (numpy, one per leaf name, in fwd's order) as JAX arrays placed on the
    mesh of `spec` with its partition (a leaf it does not name replicated)."""
    return list(place(dict(zip(names, leaves, strict=True)), spec.get("partition") or {}, mesh_of(spec)).values())


def device_pieces(array: Any) -> np.ndarray:
    """The pieces each device keeps of one JAX array, stacked in device order: shape
    `[devices, *piece shape]`. What a mesh problem compares a residual by: two programs that keep
    the same piece on every device keep the same residual, whatever global array JAX assembles
    from the pieces (measured with jax 0.10.2: a `shard_map` body's residual comes out as its
    pieces concatenated, a `jit`-style program's as the global value they split)."""
    shards = sorted(array.addressable_shards, key=lambda s: s.device.id)
    return np.stack([np.asarray(s.data) for s in shards])


def piece_bytes(array: Any) -> int:
    """Bytes of the piece of one JAX array each device holds (`sharding.shard_shape`)."""
    piece = array.sharding.shard_shape(tuple(int(d) for d in array.shape))
    return int(math.prod(int(d) for d in piece) * np.dtype(array.dtype).itemsize)


def device_layout(array: Any, pieces: np.ndarray) -> dict[str, Any]:
    """Where each device keeps its piece of one JAX array, as `ResidualFact`'s per-device fields;
    `pieces` are its pieces stacked by device (`device_pieces`), read once by the caller.

    Returns:
        `{"device_shape": [int, ...]` (the piece one device holds, `sharding.shard_shape`),
        `"device_bytes": int` (its bytes), `"replicas": int` (how many devices hold each piece: 1
        when every device holds its own, the device count when replicated),
        `"device_memory_kind": str` (`sharding.memory_kind`: "device" or "pinned_host"),
        `"devices": int` (how many devices hold a piece), `"same_pieces": bool` (every device's
        piece holds the same numbers though the sharding gives each its own: a value copied to
        every device, as a `shard_map` body that all-gathers a weight and saves it keeps it;
        False when the sharding itself replicates it or there is one device)}.
    """
    sharding = array.sharding
    shape = tuple(int(d) for d in array.shape)
    piece = [int(d) for d in sharding.shard_shape(shape)]
    indices = sharding.devices_indices_map(shape)
    devices = sorted(indices, key=lambda d: d.id)
    ranges = [
        tuple((s.start or 0, shape[i] if s.stop is None else s.stop) for i, s in enumerate(indices[d])) for d in devices
    ]
    distinct = len(set(ranges))
    same = distinct > 1 and all(np.array_equal(pieces[0], p, equal_nan=True) for p in pieces[1:])
    return {
        "device_shape": piece,
        "device_bytes": piece_bytes(array),
        "replicas": max(1, len(devices) // max(1, distinct)),
        "device_memory_kind": str(sharding.memory_kind or "device"),
        "devices": len(devices),
        "same_pieces": bool(same),
    }
