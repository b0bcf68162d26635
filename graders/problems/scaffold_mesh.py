"""`remat-judge problems new SLUG --mesh data=2,model=2`: what a scaffold on a mesh adds to the plain
one (`graders.problems.scaffold`): the `[mesh]` table with `x` split over the first axis, case sizes
every split divides, and the statement's bullet on what is compared per device."""

from __future__ import annotations

import math
import re

from graders.problems.mesh_spec import AXIS_RE, MAX_DEVICES

MESH_BULLET = """- **Compared piece by piece.** The judge places every input on the mesh and traces your function
  with the mesh set (`jax.set_mesh`). Each residual is compared as the pieces the devices keep,
  stacked by device: your piece on each device must hold the same values as the policy's piece on
  that device, so a value kept whole on every device (replicated) is a different residual from one
  split over the devices. Bytes are per device. TODO: give the reference's residuals per device.
"""


def parse_mesh(text: str, *, framework: str | None = None) -> dict[str, int]:
    """`data=2,model=2` as `{"data": 2, "model": 2}`, in order.

    Raises:
        ValueError: not `name=size` pairs, a name that is not an identifier, a repeated name, a size
            that is not an int >= 1, more than `MAX_DEVICES` devices in all, or a `framework` too (a
            framework scaffold's tree has no partition yet); the message says which.
    """
    if framework is not None:
        raise ValueError(f"--framework {framework} too: choose one (a framework scaffold's tree has no partition yet)")
    axes: dict[str, int] = {}
    for part in text.split(","):
        name, sep, size = part.strip().partition("=")
        if not sep or not re.match(AXIS_RE, name) or not size.isdigit() or int(size) < 1:
            raise ValueError(f"{part.strip()!r}: write each axis as name=size, e.g. data=2,model=2")
        if name in axes:
            raise ValueError(f"axis {name!r} is named twice")
        axes[name] = int(size)
    if math.prod(axes.values()) > MAX_DEVICES:
        raise ValueError(f"{math.prod(axes.values())} devices; at most {MAX_DEVICES}")
    return axes


def with_mesh(problem_toml: str, axes: dict[str, int]) -> str:
    """The plain scaffold's problem.toml on the mesh `axes`: `x` split over the first axis and
    replicated over the others, each case's `N` a multiple of the device count (so every split
    divides it; the large case past 1 MiB of float32 on each device's side of the comparison)."""
    devices = math.prod(axes.values())
    first = next(iter(axes))
    text = problem_toml.replace("dims = { N = 8 }", f"dims = {{ N = {8 * devices} }}")
    text = text.replace("dims = { N = 1048576 }", f"dims = {{ N = {(1 << 18) * devices} }}")
    sizes = ", ".join(f"{name} = {size}" for name, size in axes.items())
    return text + (
        "\n# The devices this problem runs on (at most 8 simulated CPU devices), in order, and how each\n"
        "# array argument is split over them: one entry per dimension, an axis name, a list of names, or []\n"
        '# for not split; an argument left out is replicated. axis_types = { name = "explicit" } is\n'
        '# optional ("auto" otherwise: the partitioner inserts the collectives). Say both in statement.md.\n'
        f'[mesh]\naxes = {{ {sizes} }}\n\n[mesh.partition]\nx = ["{first}"]\n'
    )
