"""What the FLOP count (`graders.untrusted.flops`) knows of a value, and what it folds.

A value's `Fact` is a splat constant (every element the same scalar), `TAINTED` (not known, and
computed from a cotangent argument of the backward program) or None (not known, computed from
residuals alone). `fold` says what an op is when some of its operands are known constants: a
constant, or one of its operands (a `select` with a known predicate, `x + 0`, `x * 1`), so the
counter neither counts it nor keeps its dead operands alive. `trip_count` reads the number of
iterations a scan or fori_loop fixes.
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

from graders.untrusted.ops import MAX_TRIP_COUNT, MOVE_OPS
from graders.untrusted.provenance import block_arg_index, defining_op


class _Tainted:
    """What is known of a value that depends on the backward program's cotangent arguments."""

    def __repr__(self) -> str:
        return "TAINTED"


class _Mixed:
    """What is known of a value computed from a cotangent by something other than a linear map
    (`graders.untrusted.linearity`): a backward pass is linear in its cotangent, so such a value
    is forward work with the cotangent mixed in, and counts as work on the residuals."""

    def __repr__(self) -> str:
        return "MIXED"


class _Sign:
    """What is known of a value computed from a cotangent that scaling the cotangent by a positive
    number leaves as it is: whether it is positive, finite, its sign (a NaN guard's mask). A
    select or product of such a value with a linear one stays linear in the cotangent's scale."""

    def __repr__(self) -> str:
        return "SIGN"


TAINTED = _Tainted()
MIXED = _Mixed()
SIGN = _Sign()
# a splat constant's value (booleans as 0 and 1); None: not known, computed from residuals alone;
# TAINTED: not known, and a linear function of a cotangent; MIXED: not known, and a function of a
# cotangent that is not linear (an affine or nonlinear one); SIGN: not known, and a function of a
# cotangent that its positive scale does not change (a comparison of it with zero)
Fact = float | int | None | _Tainted | _Mixed | _Sign


def constant_of(fact: Fact) -> float | int | None:
    """The splat constant `fact` holds, or None when the value is not known."""
    return fact if isinstance(fact, (int, float)) else None


# elementwise ops through which a splat passes unchanged (operand 0 is the data)
PASS_FACT_OPS = MOVE_OPS - {"stablehlo.bitcast_convert", "stablehlo.convert"} | {
    "stablehlo.slice",
    "stablehlo.dynamic_slice",
    "stablehlo.reverse",
}
_COMPARE = {
    "EQ": lambda a, b: a == b,
    "NE": lambda a, b: a != b,
    "LT": lambda a, b: a < b,
    "LE": lambda a, b: a <= b,
    "GT": lambda a, b: a > b,
    "GE": lambda a, b: a >= b,
}


def fact_at(facts: list[Fact], i: int) -> Fact:
    """`facts[i]`, or None (not known) past the end of `facts`."""
    return facts[i] if i < len(facts) else None


def set_facts(facts: dict[Any, Fact], values: list[Any], found: list[Fact]) -> None:
    """Records `found[i]` as the fact of `values[i]` in `facts` (as many as both have)."""
    for value, fact in zip(values, found, strict=False):
        facts[value] = fact


def fold(ir: Any, op: Any, name: str, ins: list[float | int | None]) -> tuple[Fact | list[int | None], bool] | None:
    """What an op is when some operands are known: (its constant value, False), (the operand each
    result is, True), or None when it must run. Only elementwise ops whose operands have the
    result's type are folded to an alias."""
    n = len(ins)
    if name == "stablehlo.optimization_barrier":
        return list(range(n)), True
    if name == "stablehlo.select" and n == 3:
        pred, a, b = ins
        if pred is not None:
            return [1 if pred else 2], True
        if a is not None and a == b:
            return a, False
        return None
    if n != 2:
        if name == "stablehlo.negate" and n == 1 and ins[0] is not None:
            return -ins[0], False
        if name == "stablehlo.not" and n == 1 and ins[0] in (0, 1) and _is_bool(ir, op):
            return 1 - cast(int, ins[0]), False
        return None
    a, b = ins
    return _fold_binary(ir, op, name, a, b)


def _fold_binary(
    ir: Any, op: Any, name: str, a: float | int | None, b: float | int | None
) -> tuple[Fact | list[int | None], bool] | None:
    """`fold` of an op of two operands, `a` and `b` what is known of them (None: not known)."""
    if name in ("stablehlo.multiply", "stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"):
        if a == 0 or b == 0:
            return 0.0, False
        if name == "stablehlo.multiply":
            if a == 1:
                return [1], True
            if b == 1:
                return [0], True
        return None
    if name == "stablehlo.add":
        if a == 0:
            return [1], True
        if b == 0:
            return [0], True
        return (a + b, False) if a is not None and b is not None else None
    if name == "stablehlo.subtract":
        if b == 0:
            return [0], True
        return (a - b, False) if a is not None and b is not None else None
    if name == "stablehlo.divide":
        if a == 0:
            return 0.0, False
        if b == 1:
            return [0], True
        return None
    if name in ("stablehlo.and", "stablehlo.or") and _is_bool(ir, op):
        absorbing, identity = (0, 1) if name == "stablehlo.and" else (1, 0)
        if absorbing in (a, b):
            return absorbing, False
        if a == identity:
            return [1], True
        if b == identity:
            return [0], True
        return None
    if name == "stablehlo.compare" and a is not None and b is not None:
        if "compare_type" in op.attributes and "UNSIGNED" in str(op.attributes["compare_type"])[:100]:
            return None
        m = re.search(r"comparison_direction (\w+)>", str(op.attributes["comparison_direction"])[:100])
        test = _COMPARE.get(m.group(1)) if m else None
        return (int(test(a, b)), False) if test is not None else None
    return None


def _is_bool(ir: Any, op: Any) -> bool:
    element = op.results[0].type.maybe_downcast().element_type
    return bool(isinstance(element, ir.IntegerType) and element.width == 1)


def splat_value(ir: Any, op: Any) -> Fact:
    """The value of a splat `stablehlo.constant`, or None."""
    try:
        attr = ir.DenseElementsAttr(op.attributes["value"])
        if not attr.is_splat:
            return None
        value = attr.get_splat_value().maybe_downcast()
        if isinstance(value, ir.FloatAttr):
            return float(value.value)
        if isinstance(value, ir.IntegerAttr):
            if _is_bool(ir, op):
                return int(value.value) & 1
            element = op.results[0].type.maybe_downcast().element_type
            return None if element.is_unsigned else int(value.value)  # read signed: not believed
        if isinstance(value, ir.BoolAttr):
            return int(value.value)
    except Exception:  # noqa: BLE001 - an attribute of a forged module that is not what it claims
        return None
    return None


def convert_fact(ir: Any, fact: float | int | None, result_type: Any) -> Fact:
    """A splat converted to the element type of `result_type` (to bool: nonzero; to an integer:
    truncated; not known when the value does not fit)."""
    if fact is None:
        return None
    element = result_type.maybe_downcast().element_type
    if isinstance(element, ir.IntegerType):
        if element.width == 1:
            return int(fact != 0)
        return int(fact) if math.isfinite(fact) else None
    if isinstance(element, ir.FloatType):
        return float(fact)
    return None


def trip_count(op: Any, facts: dict[Any, Fact]) -> int | None:
    """Iterations of a `while` that JAX emitted for a scan or fori_loop: its condition is
    `compare LT, counter, bound` with a constant bound and the counter starting from a known
    constant. None otherwise."""
    cond = op.regions[0].blocks[0] if len(op.regions) and len(op.regions[0].blocks) else None
    if cond is None:
        return None
    ops = list(cond.operations)
    if len(ops) < 2 or ops[-1].operation.name != "stablehlo.return":
        return None
    compare = defining_op(ops[-1].operands[0])
    if (
        compare is None
        or compare.operation.name != "stablehlo.compare"
        or "LT" not in str(compare.attributes["comparison_direction"])[:100]
    ):
        return None
    counter, bound = compare.operands[0], compare.operands[1]
    stop = constant_of(facts.get(bound))
    index = block_arg_index(counter, cond)
    if stop is None or index is None or index >= len(op.operands):
        return None
    start = constant_of(facts.get(op.operands[index]))
    if start is None or not (math.isfinite(start) and math.isfinite(stop)):
        return None
    return max(0, min(int(stop) - int(start), MAX_TRIP_COUNT))
