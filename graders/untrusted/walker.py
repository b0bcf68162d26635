"""The one bounded, iterative walk over an untrusted module: the op allowlist, static shapes and
types, peak live bytes and the call graph (FLOPs: `graders.untrusted.flops`), with explicit stacks and the caps of
`ReadLimits` (operations, region depth, call depth)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from graders.artifact_limits import ReadLimits
from graders.untrusted.mesh_ops import MESH_CUSTOM_CALLS, MESH_OPS
from graders.untrusted.ops import ALIASING_OPS, ALLOWED_OPS, MAX_SYMBOL_CHARS
from graders.untrusted.parse import mlir_ir
from graders.untrusted.provenance import callee_of
from graders.untrusted.result import ArtifactError, ModuleInfo


class _Types:
    """Bytes and element counts of MLIR types, memoised per type (types are uniqued by MLIR, so
    a module has few distinct ones). Refuses what a static count cannot size."""

    def __init__(self) -> None:
        ir = mlir_ir()
        self.ir = ir
        self.memo: dict[str, tuple[int, int]] = {}

    def size(self, t: Any) -> tuple[int, int]:
        """(bytes, elements) of a value of type `t`.

        Raises:
            ArtifactError: dynamic dims, unranked tensors, unknown element types, or a nested tuple.
        """
        key = str(t)  # types print compactly: a shape and an element type
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self._size(t, nested=False)
        return found

    def _size(self, t: Any, *, nested: bool) -> tuple[int, int]:
        ir = self.ir
        t = t.maybe_downcast()
        if isinstance(t, ir.RankedTensorType):
            if not t.has_static_shape:
                raise ArtifactError(f"a value has a dynamic shape ({t}); only static shapes are judged")
            n = math.prod(t.shape)
            return n * self._element_bytes(t.element_type, t), n
        if isinstance(t, ir.TupleType) and not nested:
            parts = [self._size(t.get_type(i), nested=True) for i in range(t.num_types)]
            return sum(p[0] for p in parts), sum(p[1] for p in parts)
        raise ArtifactError(
            f"a value has type {str(t)[:80]}, which the judge does not size (only ranked tensors with static shapes)"
        )

    def _element_bytes(self, e: Any, t: Any) -> int:
        ir = self.ir
        e = e.maybe_downcast()
        if isinstance(e, ir.ComplexType):
            return 2 * self._element_bytes(e.element_type, t)
        if isinstance(e, (ir.IntegerType, ir.FloatType)):
            return cast(int, max(1, (e.width + 7) // 8))  # the MLIR bindings are untyped (Any)
        raise ArtifactError(f"a value has element type {str(e)[:40]}, which the judge does not know")


@dataclass
class _Frame:
    """One block being walked: its ops in program order, and where each value defined in it dies."""

    block: Any
    depth: int
    ops: list[Any] = field(default_factory=list)
    last_use: dict[Any, int] = field(default_factory=dict)
    index: int = -1  # the op of this block currently being walked (or holding the walk)


@dataclass
class _Summary:
    """A walked block: (peak live bytes, bytes of its arguments)."""

    peak: int
    arg_bytes: int


class ModuleWalker:
    """Walks every function of a module once, callees before callers, blocks inside out."""

    def __init__(
        self,
        functions: dict[str, Any],
        limits: ReadLimits,
        allowed_custom_calls: frozenset[str],
        info: ModuleInfo,
        *,
        mesh: bool = False,
    ):
        self.ir = mlir_ir()
        self.allowed_ops = ALLOWED_OPS | MESH_OPS if mesh else ALLOWED_OPS  # `MESH_OPS` on a mesh only
        self.functions = functions
        self.limits = limits
        self.allowed = allowed_custom_calls | MESH_CUSTOM_CALLS if mesh else allowed_custom_calls
        self.info = info
        self.types = _Types()
        self.function_summary: dict[str, _Summary] = {}
        self.callees: dict[str, dict[str, None]] = {name: {} for name in functions}  # ordered sets
        self.block_summary: dict[Any, _Summary] = {}

    # -- call graph ---------------------------------------------------------------------------

    def call_order(self) -> list[str]:
        """Functions reachable from main, callees first (from the calls `scan` collected).

        Raises:
            ArtifactError: a call to an unknown function, recursion, or a chain past max_call_depth.
        """
        callees = self.callees
        order: list[str] = []
        state: dict[str, int] = {}  # 1 on the stack, 2 done
        stack: list[tuple[str, Iterator[str]]] = [("main", iter(callees["main"]))]
        state["main"] = 1
        while stack:
            if len(stack) > self.limits.max_call_depth:
                raise ArtifactError(f"calls nest deeper than {self.limits.max_call_depth} functions")
            name, pending = stack[-1]
            target = next(pending, None)
            if target is None:
                stack.pop()
                state[name] = 2
                order.append(name)
            elif target not in callees:
                raise ArtifactError(f"call to unknown function @{target[:80]}")
            elif state.get(target) == 1:
                raise ArtifactError(f"function @{target[:80]} calls itself")
            elif state.get(target) is None:
                state[target] = 1
                stack.append((target, iter(callees[target])))
        return order

    def _ops(self, root: Any) -> Iterator[tuple[Any, int]]:
        """Every op nested in `root` (not `root` itself) with its region depth, iteratively,
        counting ops against max_ops and refusing depth past max_depth."""
        stack: list[tuple[Iterator[Any], int]] = [(self._region_ops(root), 1)]
        while stack:
            ops, depth = stack[-1]
            op = next(ops, None)
            if op is None:
                stack.pop()
                continue
            yield op, depth
            if len(op.regions):
                if depth + 1 > self.limits.max_depth:
                    raise ArtifactError(f"regions nest deeper than {self.limits.max_depth} levels")
                stack.append((self._region_ops(op), depth + 1))

    @staticmethod
    def _region_ops(op: Any) -> Iterator[Any]:
        for region in op.regions:
            for block in region.blocks:
                yield from block.operations

    # -- the allowlist --------------------------------------------------------------------------

    def scan(self) -> None:
        """Counts ops and collects disallowed ones in every function, called or not (stops at
        max_ops), and refuses any value whose type cannot be sized (`_Types.size`), in every
        function and region, and over-long symbol names. Records each function's callees for
        `call_order`, so the module's ops are iterated once here.

        Raises:
            ArtifactError: past max_ops, a dynamic or unsized type, or a symbol name longer than
                MAX_SYMBOL_CHARS (XLA copies a callee's name at every call site: a 1 MiB name
                called 6,000 times took the verifier past 4 GiB, measured).
        """
        ir = self.ir
        info = self.info
        for fn_name, fn in self.functions.items():
            if len(fn_name) > MAX_SYMBOL_CHARS:
                raise ArtifactError(
                    f"a function name is {len(fn_name):,} characters long, more than the {MAX_SYMBOL_CHARS} allowed"
                )
            for arg in fn.regions[0].blocks[0].arguments if len(fn.regions) and len(fn.regions[0].blocks) else ():
                self.types.size(arg.type)
            for op, _depth in self._ops(fn):
                name = op.operation.name
                info.op_counts[name] += 1
                target = callee_of(op)
                if target is not None:
                    if len(target) > MAX_SYMBOL_CHARS:  # never keep one copy per call site
                        raise ArtifactError(
                            f"a call names a function of {len(target):,} characters, more than "
                            f"the {MAX_SYMBOL_CHARS} allowed"
                        )
                    self.callees[fn_name].setdefault(target, None)
                if info.op_counts.total() > self.limits.max_ops:
                    raise ArtifactError(f"the program has more operations than the {self.limits.max_ops:,} allowed")
                if name == "stablehlo.custom_call":
                    target = ir.StringAttr(op.attributes["call_target_name"]).value
                    if target not in self.allowed:
                        info.disallowed.append(f"stablehlo.custom_call @{target[:80]}")
                elif name == "stablehlo.composite":
                    # JAX 0.10.2 exports erf and top_k as composites with a pure decomposition, which
                    # is itself a function of the module (and so checked like every function).
                    composite = ir.StringAttr(op.attributes["name"]).value
                    if composite not in ALLOWED_OPS:
                        info.disallowed.append(f"stablehlo.composite {composite[:80]!r}")
                elif name not in self.allowed_ops:
                    info.disallowed.append(name[:80])
                    continue
                for result in op.results:  # the values of ops we would run
                    nbytes, elements = self.types.size(result.type)
                    if nbytes > info.largest_value_bytes:
                        info.largest_value_bytes, info.largest_value_elements = nbytes, elements
                for region in op.regions:
                    for block in region.blocks:
                        for arg in block.arguments:
                            self.types.size(arg.type)
        info.disallowed = sorted(set(info.disallowed))

    # -- liveness, peak and FLOPs ---------------------------------------------------------------

    def walk_function(self, name: str) -> _Summary:
        """Peak, argument bytes and FLOPs of one function whose callees are already walked.

        One pass over its ops: a value's last use in the block that defines it is the op of that
        block holding the use (directly or in a nested region), found in O(1) from the stack of
        blocks being walked; each block is summarised when its walk ends, inner blocks first.
        """
        fn = self.functions[name]
        defined_in: dict[Any, _Frame] = {}
        open_frames: set[int] = set()

        def enter(block: Any, depth: int) -> _Frame:
            frame = _Frame(block=block, depth=depth, ops=list(block.operations))
            open_frames.add(id(frame))
            for arg in block.arguments:
                defined_in[arg] = frame
            return frame

        entry = fn.regions[0].blocks[0]
        stack: list[_Frame] = [enter(entry, 0)]
        result: _Summary | None = None
        while stack:
            frame = stack[-1]
            frame.index += 1
            if frame.index >= len(frame.ops):
                stack.pop()
                open_frames.discard(id(frame))
                summary = self._summarise(frame)
                self.block_summary[frame.block] = summary
                result = summary
                continue
            op = frame.ops[frame.index]
            for value in op.operands:
                owner = defined_in.get(value)
                if owner is None or id(owner) not in open_frames:
                    raise ArtifactError("a value is used outside the region that defines it")
                owner.last_use[value] = owner.index
            for value in op.results:
                defined_in[value] = frame
            for region in reversed(list(op.regions)):
                for block in reversed(list(region.blocks)):
                    if len(stack) > self.limits.max_depth:
                        raise ArtifactError(f"regions nest deeper than {self.limits.max_depth} levels")
                    stack.append(enter(block, frame.depth + 1))
        assert result is not None
        return result

    def _summarise(self, frame: _Frame) -> _Summary:
        """Peak live bytes of a block, ops in program order.

        A value's bytes count from the op that defines it until the op that last uses it (uses
        inside nested regions count as uses by the op holding the region). Block arguments are
        live from the start. An op's results and the extra memory of what it calls or contains
        (callee or region peak minus its arguments, which alias the operands) are live together
        with everything already live.
        """
        dies_at: dict[int, list[Any]] = {}
        for v, i in frame.last_use.items():
            dies_at.setdefault(i, []).append(v)
        buffer_of: dict[Any, int] = {}
        buffer_bytes: list[int] = []
        buffer_refs: list[int] = []

        def define(value: Any, buffer: int | None = None) -> int:
            if buffer is None:
                buffer = len(buffer_bytes)
                buffer_bytes.append(self.types.size(value.type)[0])
                buffer_refs.append(0)
            buffer_of[value] = buffer
            buffer_refs[buffer] += 1
            return buffer_bytes[buffer] if buffer_refs[buffer] == 1 else 0

        def release(value: Any) -> int:
            buffer = buffer_of.pop(value, None)
            if buffer is None:
                return 0
            buffer_refs[buffer] -= 1
            return buffer_bytes[buffer] if buffer_refs[buffer] == 0 else 0

        live = 0
        for arg in frame.block.arguments:
            live += define(arg)
        arg_bytes = live
        peak = live
        for arg in frame.block.arguments:  # arguments nobody uses are dead at once
            if arg not in frame.last_use:
                live -= release(arg)
        for i, op in enumerate(frame.ops):
            name = op.operation.name
            extra = self._nested(op)
            added = 0
            for j, result in enumerate(op.results):
                if name in ALIASING_OPS and j < len(op.operands):
                    added += define(result, buffer_of.get(op.operands[j]))
                else:
                    added += define(result)
            peak = max(peak, live + max(added, extra))
            live += added
            for v in dies_at.get(i, ()):
                live -= release(v)
            for result in op.results:
                if result not in frame.last_use:
                    live -= release(result)
        return _Summary(peak=peak, arg_bytes=arg_bytes)

    def _nested(self, op: Any) -> int:
        """Extra live bytes beyond the op's operands of what one op calls or holds."""
        extra = 0
        callee = callee_of(op)
        if callee is not None:
            summary = self.function_summary[callee]
            extra = summary.peak - summary.arg_bytes
        for region in op.regions:
            for block in region.blocks:
                summary = self.block_summary[block]
                extra = max(extra, summary.peak - summary.arg_bytes)
        return extra
