"""A mesh of devices and arrays placed on it, built from the plain JSON of a problem's `[mesh]`
(what `graders.problems.mesh_spec.MeshSpec.plain()` gives; plain JSON is what crosses into the
jail). The jail's exporter (`jailside.export`) and the verifier build meshes with it.

Standard library and JAX only (this module runs inside the jail). The process must have as many
devices as the mesh: on CPU, `XLA_FLAGS=--xla_force_host_platform_device_count=N` set before JAX
creates its client (measured with jax 0.10.2: it cannot change after the backend starts, so a
process that serves meshes of several sizes starts with the largest and builds the smaller from
`jax.devices()[:k]`, as `make_mesh` does).

MeshDict: `{"axes": {name: size, ...} (in the mesh's order), "axis_types": {name: "auto" |
"explicit"} (optional, per axis, "auto" when left out), "partition": {leaf name: [None | axis |
[axis, ...], ...]} (optional; per array dimension, None when not split)}`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jailside.protocol import MAX_DEVICES, SIMULATED_DEVICES_FLAG  # noqa: F401 - re-exported

if TYPE_CHECKING:
    import jax

AXIS_TYPES = ("auto", "explicit")


class MeshUnavailable(RuntimeError):
    """The process has fewer devices than the mesh needs (the message says how to start it)."""


def _axes(spec: Mapping[str, Any]) -> dict[str, int]:
    """The `axes` of a MeshDict, checked: a non-empty mapping of names to sizes >= 1."""
    axes = spec.get("axes")
    if not isinstance(axes, Mapping) or not axes:
        raise ValueError("mesh: 'axes' must be a non-empty mapping of axis names to sizes")
    for name, size in axes.items():
        if not isinstance(name, str) or not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"mesh: axis {name!r}: the size must be an int >= 1, got {size!r}")
    return dict(axes)


def device_count(spec: Mapping[str, Any]) -> int:
    """How many devices the mesh of a MeshDict needs: the product of its axis sizes.

    Raises:
        ValueError: `axes` missing, empty, or with a size that is not an int >= 1.
    """
    return math.prod(_axes(spec).values())


def make_mesh(spec: Mapping[str, Any]) -> jax.sharding.Mesh:
    """The mesh of a MeshDict over the first `device_count(spec)` devices of this process.

    Axis types: "auto" (the partitioner chooses and inserts the collectives, GSPMD style) unless
    `axis_types` says "explicit". Passed explicitly because `jax.make_mesh` makes Explicit axes by
    default (measured with jax 0.10.2), where a matmul contracting a sharded dimension raises
    `ShardingTypeError`.

    Returns:
        a `jax.sharding.Mesh` of shape `tuple(axes.values())`, devices in `jax.devices()` order.

    Raises:
        ValueError: a malformed MeshDict (no axes, a size < 1, an unknown axis or axis type).
        MeshUnavailable: the process has fewer devices than the mesh needs.
    """
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax

    axes = _axes(spec)
    types = dict(spec.get("axis_types") or {})
    for name, kind in types.items():
        if name not in axes or kind not in AXIS_TYPES:
            raise ValueError(f"mesh: axis_types: {name!r} = {kind!r} (axes: {list(axes)}, types: {AXIS_TYPES})")
    needed = math.prod(axes.values())
    devices = jax.devices()
    if len(devices) < needed:
        sizes = " x ".join(f"{n}={s}" for n, s in axes.items())
        raise MeshUnavailable(
            f"the mesh ({sizes}) needs {needed} devices and this process has {len(devices)}: on CPU, set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={needed} (or more) before JAX starts"
        )
    kinds = {"auto": jax.sharding.AxisType.Auto, "explicit": jax.sharding.AxisType.Explicit}
    axis_types = tuple(kinds[types.get(name, "auto")] for name in axes)
    return jax.make_mesh(tuple(axes.values()), tuple(axes), axis_types, devices=devices[:needed])


def partition_spec(dims: Sequence[Any] | None) -> jax.sharding.PartitionSpec:
    """The `PartitionSpec` of one partition entry of a MeshDict: None -> not split, an axis name
    -> split over it, a list of names -> split over all of them (major to minor); None (no entry)
    -> replicated, `P()`."""
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax

    if dims is None:
        return jax.sharding.PartitionSpec()
    return jax.sharding.PartitionSpec(*(tuple(d) if isinstance(d, list | tuple) else d for d in dims))


def place(leaves: Mapping[str, Any], partition: Mapping[str, Any], mesh: jax.sharding.Mesh) -> dict[str, Any]:
    """Places each named leaf on `mesh` with the partition of its name (replicated when unnamed).

    Args:
        leaves: leaf name (an argument's name or a leaf path, `params[0]`) -> an array (numpy or
            JAX, any shape and dtype) or a `jax.ShapeDtypeStruct` (an aval, for `jax.export`).
        partition: the MeshDict's `partition` (leaf name -> one entry per dimension).
        mesh: from `make_mesh`.

    Returns:
        leaf name -> a JAX array placed with `NamedSharding(mesh, spec)` (each device holds its
        piece: `x.sharding.shard_shape(x.shape)`), or a `ShapeDtypeStruct` of the same shape and
        dtype carrying that sharding; in the order of `leaves`.

    Raises:
        ValueError: `partition` names a leaf that is not in `leaves`, or an entry's length is not
            the leaf's rank. (JAX raises on an unknown axis or a size a split does not divide.)
    """
    # JAX only inside the jail's child (and the reference's): the runner's protocol stays light
    import jax

    stray = sorted(set(partition) - set(leaves))
    if stray:
        raise ValueError(f"mesh: partition names {stray}, which are not among the leaves {list(leaves)}")
    out: dict[str, Any] = {}
    for name, leaf in leaves.items():
        dims = partition.get(name)
        if dims is not None and len(dims) != len(leaf.shape):
            raise ValueError(f"mesh: partition of {name!r} has {len(dims)} entries, its rank is {len(leaf.shape)}")
        sharding = jax.sharding.NamedSharding(mesh, partition_spec(dims))
        if isinstance(leaf, jax.ShapeDtypeStruct):
            out[name] = jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
        else:
            out[name] = jax.device_put(leaf, sharding)
    return out
