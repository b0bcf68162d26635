"""What an operation of an untrusted program computes, up to which values it reads: its signature,
and a label that names it for a student.

Two ops with one signature are the same operation on the same types (name, operand and result
types, and the attributes that decide the arithmetic: contracting dimensions, reduced dimensions,
a comparison's direction, a reduction's body). The FLOP counter (`graders.untrusted.flops`) calls
an op of a backward program that depends on no cotangent and has a signature of the forward
program's a recomputation: it rebuilds a forward value from what was saved. cos(z) from a saved z,
the transpose of a slice or the sum of gradient blocks have no forward signature, so they are the
derivative's own arithmetic, whatever the formulation.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from graders.untrusted.ops import MOVE_OPS
from graders.untrusted.provenance import block_arg_index, defining_op

# the attributes that decide what an op computes (not how it is named or placed)
_ARITHMETIC_ATTRIBUTES = (
    "dot_dimension_numbers",
    "dimension_numbers",
    "dimensions",
    "comparison_direction",
    "compare_type",
    "window_dimensions",
    "window_strides",
    "base_dilations",
    "window_dilations",
    "padding",
    "lhs_dilation",
    "rhs_dilation",
    "feature_group_count",
    "batch_group_count",
    "exponent_bits",
    "mantissa_bits",
)
_MAX_ATTRIBUTE_CHARS = 512
_MAX_TYPE_CHARS = 256
_MAX_BODY_OPS = 16
_MAX_TRACE_STEPS = 64


def op_signature(op: Any) -> str:
    """A bounded digest (32 hex digits) of what `op` computes, blind to its operands' identity.

    Reads the op's name, its operand and result types, the attributes in `_ARITHMETIC_ATTRIBUTES`
    (each cut at 512 characters) and the names of the first 16 ops of a region's first block (a
    reduction's body: add or max). Never raises on a module the walker accepted.
    """
    parts = [op.operation.name]
    parts.extend(str(v.type)[:_MAX_TYPE_CHARS] for v in op.operands)
    parts.append("->")
    parts.extend(str(r.type)[:_MAX_TYPE_CHARS] for r in op.results)
    for name in _ARITHMETIC_ATTRIBUTES:
        if name in op.attributes:
            parts.append(f"{name}={str(op.attributes[name])[:_MAX_ATTRIBUTE_CHARS]}")
    for region in op.regions:
        for block in region.blocks:
            parts.extend(inner.operation.name for _, inner in zip(range(_MAX_BODY_OPS), block.operations, strict=False))
            break
        break
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z0-9]+)>")


def short_type(t: Any) -> str:
    """`tensor<32x256xf32>` as `f32[32,256]` (other types as MLIR prints them, cut at 80 characters)."""
    text = str(t)[:_MAX_TYPE_CHARS]
    m = _TENSOR.fullmatch(text)
    if not m:
        return text[:80]
    dims = [d for d in m.group(1).split("x") if d]
    return f"{m.group(2)}[{','.join(dims)}]"


def _residual_index(value: Any, main_block: Any, n_residuals: int) -> int | None:
    """The residual argument `value` is, looking back through data movement in its own block
    (at most 64 steps); None when it is another value."""
    for _ in range(_MAX_TRACE_STEPS):
        index = block_arg_index(value, main_block)
        if index is not None:
            return index if index < n_residuals else None
        owner = defining_op(value)
        if owner is None or owner.operation.name not in MOVE_OPS or not len(owner.operands):
            return None
        value = owner.operands[0]
    return None


def recompute_label(op: Any, main_block: Any, n_residuals: int) -> str:
    """How the panel names a recomputed op: `dot_general({residual 0}, computed f32[1024]) ->
    f32[896]`, an operand that is not a residual read as a value the backward pass computes.
    `{residual k}` placeholders are filled in by `graders.checks.comparison.RecomputeFigures.of`
    once the residuals' own names are known."""
    operands = []
    for v in op.operands:
        k = _residual_index(v, main_block, n_residuals)
        operands.append(f"{{residual {k}}}" if k is not None else f"computed {short_type(v.type)}")
    results = ", ".join(short_type(r.type) for r in op.results)
    return f"{op.operation.name.split('.', 1)[-1]}({', '.join(operands)}) -> {results}"
