"""Where each output of an untrusted program comes from (an argument, a named value, a constant),
read by following defining ops back through data movement, iteratively and bounded."""

from __future__ import annotations

from typing import Any, cast

from graders.untrusted.ops import ALIASING_OPS, MAX_PROVENANCE_STEPS, MOVE_OPS
from graders.untrusted.parse import mlir_ir


def callee_of(op: Any) -> str | None:
    """The function `op` runs: `func.call`'s callee, or a composite's decomposition."""
    ir = mlir_ir()
    name = op.operation.name
    if name == "func.call":
        return cast(str, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)  # untyped MLIR bindings
    if name == "stablehlo.composite":
        return cast(str, ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value)
    return None


def defining_op(value: Any) -> Any | None:
    """The op whose result `value` is, or None for a block argument."""
    owner = value.owner
    ir = mlir_ir()
    if isinstance(owner, ir.Block):
        return None
    return owner


def block_arg_index(value: Any, block: Any) -> int | None:
    """The position of `value` among the arguments of `block`, or None when it is not one of them."""
    ir = mlir_ir()
    if isinstance(value.owner, ir.Block) and value.owner == block:
        return cast(int, ir.BlockArgument(value).arg_number)  # the MLIR bindings are untyped (Any)
    return None


def provenance_of(value: Any, main_block: Any, functions: dict[str, Any]) -> str:
    """The op that produces `value`, an output of `main`, looking through what only moves data.

    Follows: data-movement ops (reshape, transpose, broadcast, convert, reduce_precision, which
    JAX puts on checkpoint-saved values) to their operand; `optimization_barrier` result j to
    operand j; `func.call` results into the callee's return and callee arguments back out to the
    call's operands (a stack of open calls, so SSA names reused across functions never mix);
    `dynamic_update_slice` (a scan stacking one value per iteration) to the update; a `while`
    result to what its body returns, and a loop-carried body argument to the value carried
    (the loop's initial value when the body passes it through); `case`/`if` to the first branch.
    Bounded by MAX_PROVENANCE_STEPS and a visited set.
    """
    ir = mlir_ir()
    calls: list[Any] = []  # the func.call ops we are inside, innermost last
    visited: set[tuple[Any, int]] = set()
    for _ in range(MAX_PROVENANCE_STEPS):
        key = (value, len(calls))
        if key in visited:
            return "a loop-carried value"
        visited.add(key)
        if isinstance(value.owner, ir.Block):
            value, answer = _from_block_argument(value, main_block, calls)
        else:
            value, answer = _from_op_result(value, functions, calls)
        if answer is not None:
            return answer
    return "a long chain of operations"


def _from_block_argument(value: Any, main_block: Any, calls: list[Any]) -> tuple[Any, str | None]:
    """One step of `provenance_of` back from a block argument: (the value to follow, None), or
    (None, the answer). Leaving a callee pops its call from `calls`."""
    ir = mlir_ir()
    owner = value.owner
    index = ir.BlockArgument(value).arg_number
    parent = owner.owner  # the op holding the region (func.func, while, case, ...)
    pname = parent.operation.name if parent is not None else ""
    if owner == main_block and not calls:
        return None, f"argument {index}"
    if pname == "func.func" and calls:
        call = calls.pop()
        if index >= len(call.operands):
            return None, "an argument"
        return call.operands[index], None
    if pname == "stablehlo.while":
        body = parent.regions[1].blocks[0] if len(parent.regions) > 1 else None
        carried = _returned(body, index) if body is not None else None
        if carried is not None and carried != value:
            return carried, None
        if index < len(parent.operands):
            return parent.operands[index], None
        return None, "a loop-carried value"
    return None, "a block argument"


def _from_op_result(value: Any, functions: dict[str, Any], calls: list[Any]) -> tuple[Any, str | None]:
    """One step of `provenance_of` back from an op's result: (the value to follow, None), or (None,
    the answer). Entering a callee pushes its call onto `calls`."""
    ir = mlir_ir()
    op = value.owner
    name: str = op.operation.name  # (the MLIR bindings are untyped)
    result_index = ir.OpResult(value).result_number
    if name == "func.call":
        callee = functions.get(callee_of(op) or "")
        returned = _returned(callee.regions[0].blocks[0], result_index) if callee is not None else None
        if returned is None:
            return None, "a call"
        calls.append(op)
        return returned, None
    if name in MOVE_OPS and len(op.operands):
        return op.operands[0], None
    if name in ALIASING_OPS and result_index < len(op.operands):
        return op.operands[result_index], None
    if name == "stablehlo.dynamic_update_slice" and len(op.operands) > 1:
        return op.operands[1], None
    if name == "stablehlo.while" and len(op.regions) > 1:
        returned = _returned(op.regions[1].blocks[0], result_index)
        if returned is None:
            return None, "a loop"
        return returned, None
    if name in ("stablehlo.case", "stablehlo.if") and len(op.regions):
        returned = _returned(op.regions[0].blocks[0], result_index)
        if returned is None:
            return None, "a branch"
        return returned, None
    return None, name.split(".", 1)[-1]


def _returned(block: Any, index: int) -> Any | None:
    ops = list(block.operations)
    if not ops or index >= len(ops[-1].operands):
        return None
    return ops[-1].operands[index]
