"""The collectives of a compiled per-device program and the bytes each device receives through
them: what the backward pass of a problem on a mesh communicates (docs/ARCHITECTURE.md, "Problems
on a mesh").

Read from XLA's compiled HLO text (`compiled.as_text()`) because `jit`-style code exports no
collective at all: the partitioner inserts them when it compiles (measured with jax 0.10.2).
The text is XLA's, printed from a program the verifier already bounded; it is read line by line,
each line cut at `MAX_LINE_CHARS`, with patterns that do not backtrack over a line.

Bytes received per device, for one collective whose replica group has g devices: all-gather
result × (g-1)/g; reduce-scatter and all-to-all operand × (g-1)/g; all-reduce 2 × operand ×
(g-1)/g, as a ring does; collective-permute operand. Estimates of what a ring or direct exchange
moves, the same for the reference and a submission, not a measurement of the link.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_LINE_CHARS = 100_000
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute", "collective-broadcast")
_COLLECTIVE = re.compile(
    r"^\s*(?:ROOT\s+)?%[\w.\-]+\s*=\s*(\([^=]*?\)|\S+)\s+(" + "|".join(KINDS) + r")(?:-start)?\(([^)]*)\)(.*)$"
)
_DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(\([^=]*?\)|\S+)\s")
_ARRAY_TYPE = re.compile(r"\b(pred|[sufc]\d+|bf16)\[([\d,]*)\]")
_GROUPS_LISTED = re.compile(r"replica_groups=\{\{([\d,]*)\}")
_GROUPS_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
# XLA's mesh form: `replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'}`, a group per value of
# the axes left out, over the axes named in braces
_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]{0,2000})\]\s*\{([^}]{0,2000})\}")
_MESH_AXIS = re.compile(r"'([^']{1,100})'=(\d+)")


@dataclass(frozen=True)
class Communication:
    """What one program's collectives move, per device.

    Attributes:
        counts: collective kind (`KINDS`, XLA's names) -> how many the program runs.
        received_bytes: bytes one device receives through all of them (the module docstring's
            estimate).
    """

    counts: dict[str, int]
    received_bytes: int

    def describe(self) -> str:
        """`2 all-gather, 2 reduce-scatter: 48 KiB received per device`, or `no collective`."""
        if not self.counts:
            return "no collective"
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.counts.items()))
        return f"{kinds}: {self.received_bytes:,} bytes received per device"


def _type_bytes(hlo_type: str) -> int:
    """Bytes of an HLO type (`f32[16,64]{1,0}` or a tuple of them); pred as one byte."""
    total = 0
    for dtype, dims in _ARRAY_TYPE.findall(hlo_type):
        bits = 8 if dtype == "pred" else 16 if dtype == "bf16" else int(dtype[1:])
        total += max(1, bits // 8) * math.prod(int(d) for d in dims.split(",") if d)
    return total


def _group_size(attributes: str, devices: int) -> int:
    """How many devices one replica group of a collective holds (`{{0,1,2,3}}`, `[1,4]<=[4]`, or
    `mesh['axis_0'=4,'axis_1'=1] {'axis_0'}`); all `devices` when the text says none of them."""
    in_mesh = _GROUPS_MESH.search(attributes)
    if in_mesh:
        sizes = {name: int(n) for name, n in _MESH_AXIS.findall(in_mesh.group(1))}
        named = re.findall(r"'([^']{1,100})'", in_mesh.group(2))
        return max(1, math.prod(sizes.get(name, 1) for name in named))
    listed = _GROUPS_LISTED.search(attributes)
    if listed:
        return max(1, len(listed.group(1).split(",")))
    iota = _GROUPS_IOTA.search(attributes)
    return max(1, int(iota.group(2))) if iota else devices


def _operand_bytes(operand: str, defined: dict[str, str]) -> int:
    """Bytes of one operand: its type when the text writes it (`f32[4,16]{1,0} %p`), else the type
    of the value it names."""
    return _type_bytes(operand) or _type_bytes(defined.get(operand.strip().split()[-1].lstrip("%"), ""))


def communication(hlo_text: str, devices: int) -> Communication:
    """The collectives of one compiled program (`compiled.as_text()`) and the bytes one of its
    `devices` devices receives through them."""
    lines = [line[:MAX_LINE_CHARS] for line in hlo_text.splitlines()]
    defined = {m.group(1): m.group(2) for line in lines if (m := _DEFINITION.match(line))}
    counts: dict[str, int] = {}
    received = 0.0
    for line in lines:
        m = _COLLECTIVE.match(line)
        if not m:
            continue
        result_type, kind, operands, attributes = m.groups()
        operand_bytes = sum(_operand_bytes(o, defined) for o in operands.split(", ") if o.strip())
        result_bytes = _type_bytes(result_type)
        g = _group_size(attributes, devices)
        share = (g - 1) / g
        received += {
            "all-gather": result_bytes * share,
            "all-reduce": 2 * operand_bytes * share,
            "collective-permute": operand_bytes,
        }.get(kind, operand_bytes * share)
        counts[kind] = counts.get(kind, 0) + 1
    return Communication(counts=counts, received_bytes=round(received))
