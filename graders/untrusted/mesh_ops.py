"""What a program on a mesh of devices may hold beyond one device's ops: Shardy's sharding
annotations, `shard_map` bodies, collectives and device indices (allowed only when the problem has
a `[mesh]`: `graders.untrusted.reader.inspect_module`'s `mesh_axes`), and on how many devices a
`shard_map` body runs."""

from __future__ import annotations

import re
from typing import Any

from graders.untrusted.result import ArtifactError

# Measured with jax 0.10.2: `jit`-style code exports `sdy.sharding_constraint`, a
# `jax.shard_map` exports `sdy.manual_computation` (its body on per-device shapes, ended by
# `sdy.return`) holding the collectives, and the module declares its meshes with `sdy.mesh`.
SHARDING_OPS = frozenset({"sdy.sharding_constraint", "sdy.reshard"})  # the value itself, re-laid out
COLLECTIVE_OPS = frozenset(
    {
        "stablehlo.all_gather",
        "stablehlo.all_reduce",
        "stablehlo.reduce_scatter",
        "stablehlo.all_to_all",
        "stablehlo.collective_permute",
        "stablehlo.collective_broadcast",
    }
)
MANUAL_COMPUTATION = "sdy.manual_computation"
# which device a `shard_map` body runs on (`jax.lax.axis_index`)
DEVICE_INDEX_OPS = frozenset({"stablehlo.partition_id", "stablehlo.replica_id"})
MESH_OPS = SHARDING_OPS | COLLECTIVE_OPS | DEVICE_INDEX_OPS | {MANUAL_COMPUTATION, "sdy.return"}
MESH_DECLARATION = "sdy.mesh"  # a module-level symbol: the mesh's axes and sizes
# XLA's own annotation that moves a value to another memory space (no callback, no host code):
# measured with jax 0.10.2, an offloading policy on a mesh exports it where one device's program
# only marks the result's `mhlo.memory_kind`
MESH_CUSTOM_CALLS = frozenset({"annotate_device_placement"})


def manual_devices(op: Any, mesh_axes: dict[str, int]) -> int:
    """On how many devices a `shard_map` body (`sdy.manual_computation`) runs: the product of the
    sizes of its manual axes (its `manual_axes` attribute) in the problem's mesh.

    Raises:
        ArtifactError: a manual axis the problem's mesh does not have.
    """
    devices = 1
    attribute = str(op.attributes["manual_axes"])[:2000] if "manual_axes" in op.attributes else ""
    for axis in re.findall(r'"([^"]{1,100})"', attribute):
        if axis not in mesh_axes:
            raise ArtifactError(f"a shard_map runs over an axis {axis[:40]!r} the problem's mesh does not have")
        devices *= mesh_axes[axis]
    return devices
