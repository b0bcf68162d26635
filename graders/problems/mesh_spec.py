"""`[mesh]` of `problem.toml`: the devices a problem runs on and how its arguments are split over
them (`MeshSpec`), checked against the arguments' shapes and every case's dims (`check_mesh`).

The jail exports a submission on the mesh and the verifier judges it per device (docs/ARCHITECTURE.md,
"Problems on a mesh"). No JAX here (this module is read by the server's side of the judge); the jail
builds the mesh from `MeshSpec.plain()` with `jailside.mesh.make_mesh`.

In problem.toml:

    [mesh]
    axes = { data = 2, model = 2 }          # ordered: the mesh's shape is (2, 2)
    axis_types = { model = "explicit" }     # optional, per axis; "auto" when left out

    [mesh.partition]                        # per array argument (or leaf path); unnamed: replicated
    x = ["data", []]                        # dim 0 over `data`, dim 1 not split
    "params[0]" = [["data", "model"], []]   # dim 0 over both axes (4 pieces)

TOML has no null, so a dimension that is not split is `[]`; a JSON or Python spec may also say
`None`. Both are stored as None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from graders.problems.generators import StrictModel
from jailside.protocol import MAX_DEVICES as SIMULATED_MAX_DEVICES

AXIS_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"  # the same pattern as spec.DIM_RE (spec imports this module)
MAX_DEVICES = SIMULATED_MAX_DEVICES  # simulated CPU devices in one process: every template starts with this many

AxisName = Annotated[str, Field(pattern=AXIS_RE)]
# one array dimension: not split (None), split over one axis, or over several (major to minor)
DimPartition = AxisName | list[AxisName] | None


class MeshSpec(StrictModel):
    """A mesh of devices and the partition of the arguments over it.

    Attributes:
        axes: axis name -> size (a count of devices, >= 1), in the mesh's order; the product of
            the sizes (`device_count`) is 1..8.
        axis_types: axis name -> "auto" or "explicit"; an axis left out is "auto". Auto is the
            default because it is the style the problems are written in (GSPMD: the partitioner
            inserts the collectives): measured with jax 0.10.2, `jax.make_mesh` makes Explicit
            axes by default, where a matmul contracting a sharded dimension raises
            `ShardingTypeError` unless the code gives `out_sharding=`, and `with_sharding_constraint`
            becomes an assertion; `shard_map` code behaves the same under either type.
        partition: argument name (or leaf path, e.g. `params[0]`, `params['Dense_0']['kernel']`)
            -> one entry per array dimension (`DimPartition`); an argument left out is replicated.

    Raises (as pydantic's ValidationError, each message naming the field):
        ValueError: more than 8 devices, an `axis_types` or partition entry naming an unknown
            axis, one axis used twice in one argument's partition.
    """

    axes: Annotated[dict[AxisName, Annotated[int, Field(ge=1, le=MAX_DEVICES)]], Field(min_length=1)]
    axis_types: dict[AxisName, Literal["auto", "explicit"]] = {}
    partition: dict[Annotated[str, Field(min_length=1, max_length=200)], list[DimPartition]] = {}

    @field_validator("partition", mode="before")
    @classmethod
    def _empty_list_is_none(cls, raw: object) -> object:
        if not isinstance(raw, dict):
            return raw  # pydantic reports the wrong type
        return {
            key: [None if d == [] else d for d in dims] if isinstance(dims, list) else dims for key, dims in raw.items()
        }

    @model_validator(mode="after")
    def _axes_are_known_and_used_once(self) -> MeshSpec:
        if self.device_count > MAX_DEVICES:
            sizes = " x ".join(f"{name}={size}" for name, size in self.axes.items())
            raise ValueError(f"{self.device_count} devices ({sizes}); at most {MAX_DEVICES}")
        known = ", ".join(repr(a) for a in self.axes)
        for name in self.axis_types:
            if name not in self.axes:
                raise ValueError(f"axis_types: unknown axis {name!r} (the mesh has {known})")
        for arg, dims in self.partition.items():
            seen: set[str] = set()
            for i, axis in ((i, a) for i, d in enumerate(dims) for a in dim_axes(d)):
                if axis not in self.axes:
                    raise ValueError(f"partition.{arg}: dimension {i}: unknown axis {axis!r} (the mesh has {known})")
                if axis in seen:
                    raise ValueError(f"partition.{arg}: axis {axis!r} is used twice (a mesh axis splits one dimension)")
                seen.add(axis)
        return self

    @property
    def device_count(self) -> int:
        """How many devices the mesh needs: the product of the axis sizes."""
        return math.prod(self.axes.values())

    def axis_type(self, axis: str) -> Literal["auto", "explicit"]:
        """The type of `axis` ("auto" unless `axis_types` says otherwise)."""
        return self.axis_types.get(axis, "auto")

    def pieces(self, dim: DimPartition) -> int:
        """Into how many pieces a dimension partitioned as `dim` is split (1 when not split)."""
        return math.prod(self.axes[a] for a in dim_axes(dim))

    def plain(self) -> dict[str, Any]:
        """The spec as plain JSON for the jail (`jailside.mesh.make_mesh`): `{"axes": {name: size},
        "axis_types": {name: "auto" | "explicit"} (every axis), "partition": {arg: [None | str |
        [str, ...], ...]}}`; dicts keep the mesh's axis order."""
        return {
            "axes": dict(self.axes),
            "axis_types": {a: self.axis_type(a) for a in self.axes},
            "partition": {k: [d if not isinstance(d, list) else list(d) for d in v] for k, v in self.partition.items()},
        }


def dim_axes(dim: DimPartition) -> list[str]:
    """The axes one dimension is split over, major to minor ([] when not split)."""
    if dim is None:
        return []
    return [dim] if isinstance(dim, str) else list(dim)


def check_mesh(
    mesh: MeshSpec,
    shapes: Mapping[str, Sequence[int | str] | None],
    cases: Mapping[str, Mapping[str, int]],
) -> None:
    """Checks the partition of `mesh` against the arguments and every case's sizes.

    Args:
        mesh: the parsed `[mesh]`.
        shapes: each name a partition may use -> its shape (ints and dimension names), or None for
            a name that is no single array (a static argument, or a list or tree argument as a
            whole: its leaves are named by path, `params[0]`).
        cases: case name -> its `dims` (dimension name -> size).

    Raises:
        ValueError: a partition naming no argument, or a static, list or tree argument; a
            partition whose number of entries is not the argument's rank; a dimension whose size
            in some case is not divisible by the number of pieces its axes split it into.
    """
    for arg, dims in mesh.partition.items():
        if arg not in shapes:
            known = ", ".join(repr(n) for n, s in shapes.items() if s is not None)
            raise ValueError(f"mesh.partition.{arg}: no array argument of that name (arrays: {known})")
        shape = shapes[arg]
        if shape is None:
            raise ValueError(
                f"mesh.partition.{arg}: not one array (a static, list or tree argument); "
                f"partition a list's or tree's leaves by path, e.g. '{arg}[0]'"
            )
        if len(dims) != len(shape):
            raise ValueError(
                f"mesh.partition.{arg}: {len(dims)} entries for an argument of rank {len(shape)} "
                f"(shape {list(shape)}): one per dimension, [] for a dimension not split"
            )
        for case, sizes in cases.items():
            for i, (size, dim) in enumerate(zip(shape, dims, strict=True)):
                n = size if isinstance(size, int) else sizes.get(size)
                pieces = mesh.pieces(dim)
                if n is not None and n % pieces:
                    split = " x ".join(f"{a}={mesh.axes[a]}" for a in dim_axes(dim))
                    named = f"{size} = {n}" if isinstance(size, str) else str(n)
                    raise ValueError(
                        f"mesh.partition.{arg}: case {case!r}: dimension {i} ({named}) is not divisible "
                        f"by {pieces} ({split})"
                    )
