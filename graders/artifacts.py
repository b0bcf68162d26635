"""Reading exported StableHLO artifacts: deserialization, the op allowlist, peak live bytes,
backward FLOPs, the provenance of each output and a content digest that ignores debug locations
(`normalized_digest`, the key of the result cache).

Runs in the trusted verifier process on untrusted artifacts, before any of them is executed, so
everything here is bounded and linear in the module's size:

- The module is parsed from its serialized bytecode (`Exported.mlir_module_serialized`, through
  the MLIR bindings that ship with jaxlib 0.10.2) and never printed as text: bytecode uniques
  attributes and locations, so a 1 MB artifact can print as gigabytes. The digest hashes the
  module written back as bytecode, for the same reason.
- Every walk is iterative (explicit stacks, no Python recursion), counts operations as it goes
  and stops at `max_ops`, and refuses region nesting deeper than `max_depth` and call chains
  longer than `max_call_depth`.
- Every value must have a static shape and a known element type; a dynamic (`tensor<?xf32>`) or
  unranked tensor would be counted as zero bytes by a static walk, so it is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, cast

from graders.artifact_limits import Aval, ReadLimits

# Pure computation: the ops a differentiated numerical function may contain. Everything else is
# rejected before the artifact runs, in particular custom_call (host callbacks, FFI), infeed,
# outfeed, send, recv, tokens and collectives.
STABLEHLO_PURE_OPS = frozenset(
    """
abs add and atan2 batch_norm_grad batch_norm_inference batch_norm_training bitcast_convert broadcast
broadcast_in_dim case cbrt ceil cholesky clamp compare complex concatenate constant convert convolution
cosine count_leading_zeros divide dot dot_general dynamic_slice dynamic_update_slice einsum exponential
exponential_minus_one fft floor gather get_tuple_element if imag iota is_finite log log_plus_one logistic
map maximum minimum multiply negate not optimization_barrier or pad popcnt power real reduce
reduce_precision reduce_window remainder reshape return reverse rng rng_bit_generator round_nearest_afz
round_nearest_even rsqrt scatter select select_and_scatter shift_left shift_right_arithmetic
shift_right_logical sign sine slice sort sqrt subtract tan tanh transpose triangular_solve tuple
unary_einsum while xor
""".split()
)
CHLO_PURE_OPS = frozenset(
    """
acos acosh asin asinh atan atanh bessel_i0e bessel_i1e conj constant constant_like cosh digamma erf
erf_inv erfc is_inf is_neg_inf is_pos_inf lgamma next_after polygamma sinh square tan top_k zeta
""".split()
)
ALLOWED_OPS = frozenset(
    {f"stablehlo.{op}" for op in STABLEHLO_PURE_OPS}
    | {f"chlo.{op}" for op in CHLO_PURE_OPS}
    | {"func.func", "func.call", "func.return"}
)
ALIASING_OPS = frozenset({"stablehlo.optimization_barrier"})  # results are their operands, no new memory
# Ops that move or relabel data without arithmetic: no FLOPs, and provenance looks through them.
MOVE_OPS = frozenset(
    {
        "stablehlo.reshape",
        "stablehlo.transpose",
        "stablehlo.broadcast_in_dim",
        "stablehlo.broadcast",
        "stablehlo.convert",
        "stablehlo.bitcast_convert",
        "stablehlo.reduce_precision",
        "stablehlo.copy",
    }
)
NO_FLOP_OPS = MOVE_OPS | {
    "stablehlo.constant",
    "stablehlo.iota",
    "stablehlo.get_tuple_element",
    "stablehlo.tuple",
    "stablehlo.optimization_barrier",
    "stablehlo.return",
    "func.return",
    "func.call",
    "stablehlo.slice",
    "stablehlo.dynamic_slice",
    "stablehlo.dynamic_update_slice",
    "stablehlo.concatenate",
    "stablehlo.pad",
    "stablehlo.reverse",
    "stablehlo.gather",
    "stablehlo.while",
    "stablehlo.case",
    "stablehlo.if",
    "stablehlo.composite",
    "chlo.constant",
    "chlo.constant_like",
}
MAX_TRIP_COUNT = 1 << 30  # a loop bound read from a constant is believed up to this
MAX_SYMBOL_CHARS = 1024  # longest function name accepted


class ArtifactError(Exception):
    """An artifact cannot be deserialized, parsed or accepted (a forged or corrupt bundle, a dynamic
    shape, a module past the caps). The message is safe to show to the submission's author."""


@dataclass
class ModuleInfo:
    """What static inspection found in one artifact.

    Attributes:
        op_counts: how many of each op (by full name, e.g. "stablehlo.dot_general").
        disallowed: op names (or `custom_call @target`) outside the allowlist, sorted.
        peak_live_bytes: the most bytes live at once when ops run in program order (see
            `_Frame.peak`); 0 when `disallowed` is not empty (the module is not walked).
        flops: floating-point operations of one run of `main`: 2·(result elements)·(contracted
            size) per `dot_general`/`dot`/`convolution`, one per result element for other
            arithmetic, zero for data movement; callees counted per call, `while` bodies times
            the trip count read from the loop's bound (1 when unknown: see `flops_exact`), the
            costliest branch of a `case`/`if`.
        flops_exact: False when some loop's trip count could not be read.
        sources: per output of `main`, the op that produces it ("dot_general", "sine", ...) or
            "argument i" (0-based flat input), looking through data movement, calls, scan stacking
            (`dynamic_update_slice`) and loop carries (see `_provenance`).
        functions: number of functions in the module.
        digest: `normalized_digest` of the artifact (64 hex digits); "" when `disallowed` is not
            empty (the module is not walked).
        program_digest: like `digest`, but blind to names too (`_program_digest`): two programs
            that differ only in the names of their functions and variables get the same one. For
            finding identical programs among students (docs/ARCHITECTURE.md, "Insight"), never
            for caching results (a name can matter to an error message).
        largest_value_bytes, largest_value_elements: the bytes and elements of the largest single
            value any op of the module defines (the biggest temporary a backward pass can hold
            besides its inputs).
        memory_kinds: per output of `main`, where the program leaves it: its result attribute
            `mhlo.memory_kind` ("device", or "pinned_host" for a value a checkpoint policy offloads
            to host memory, e.g. `save_and_offload_only_these_names`); "device" when unmarked.
    """

    op_counts: Counter[str] = field(default_factory=Counter)
    disallowed: list[str] = field(default_factory=list)
    peak_live_bytes: int = 0
    flops: int = 0
    flops_exact: bool = True
    sources: list[str] = field(default_factory=list)
    functions: int = 0
    digest: str = ""
    program_digest: str = ""
    largest_value_bytes: int = 0
    largest_value_elements: int = 0
    memory_kinds: list[str] = field(default_factory=list)

    @property
    def n_ops(self) -> int:
        return sum(self.op_counts.values())


def deserialize(blob: bytes) -> Any:
    """`jax.export.deserialize` that reports any failure as ArtifactError.

    Raises:
        ArtifactError: not a serialized `jax.export.Exported`.
    """
    from jax import export

    try:
        return export.deserialize(bytearray(blob))
    except Exception as exc:  # noqa: BLE001 - the flatbuffer parser raises many kinds on corrupt input
        raise ArtifactError(f"not a jax.export artifact: {type(exc).__name__}: {exc}"[:500]) from None


def exported_avals(avals: Any) -> list[Aval]:
    """`Exported.in_avals` / `out_avals` as our Aval list.

    Raises:
        ArtifactError: a symbolic (shape-polymorphic) dimension or an unknown dtype.
    """
    out = []
    for a in avals:
        try:
            shape = tuple(int(d) for d in a.shape)
            dtype = str(a.dtype)
        except Exception:  # noqa: BLE001 - a forged aval's shape or dtype can raise anything
            raise ArtifactError(
                f"a value has a symbolic or dynamic shape ({a.shape}); only static shapes are judged"
            ) from None
        out.append(Aval(shape, dtype))
    return out


# --- MLIR ------------------------------------------------------------------------------------


def _ir() -> Any:
    from jax._src.lib.mlir import ir

    return ir


class _Types:
    """Bytes and element counts of MLIR types, memoised per type (types are uniqued by MLIR, so
    a module has few distinct ones). Refuses what a static count cannot size."""

    def __init__(self) -> None:
        ir = _ir()
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


def _callee(op: Any) -> str | None:
    """The function `op` runs: `func.call`'s callee, or a composite's decomposition."""
    ir = _ir()
    name = op.operation.name
    if name == "func.call":
        return cast(str, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)  # untyped MLIR bindings
    if name == "stablehlo.composite":
        return cast(str, ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value)
    return None


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
    """A walked block: (peak live bytes, bytes of its arguments, FLOPs of one run)."""

    peak: int
    arg_bytes: int
    flops: int


class _Reader:
    """Walks every function of a module once, callees before callers, blocks inside out."""

    def __init__(
        self, functions: dict[str, Any], limits: ReadLimits, allowed_custom_calls: frozenset[str], info: ModuleInfo
    ):
        self.ir = _ir()
        self.functions = functions
        self.limits = limits
        self.allowed = allowed_custom_calls
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
                target = _callee(op)
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
                elif name not in ALLOWED_OPS:
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
        flops = 0
        for arg in frame.block.arguments:  # arguments nobody uses are dead at once
            if arg not in frame.last_use:
                live -= release(arg)
        for i, op in enumerate(frame.ops):
            name = op.operation.name
            extra, op_flops = self._nested(op)
            flops += op_flops
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
        return _Summary(peak=peak, arg_bytes=arg_bytes, flops=min(flops, 1 << 62))

    def _nested(self, op: Any) -> tuple[int, int]:
        """(extra live bytes beyond the op's operands, FLOPs) of one op, with what it calls or holds."""
        name = op.operation.name
        extra = 0
        flops = self._op_flops(op)
        callee = _callee(op)
        if callee is not None:
            summary = self.function_summary[callee]
            extra = summary.peak - summary.arg_bytes
            flops += summary.flops
        blocks = [self.block_summary[b] for region in op.regions for b in region.blocks]
        for summary in blocks:
            extra = max(extra, summary.peak - summary.arg_bytes)
        if name == "stablehlo.while" and blocks:
            trips = self._trip_count(op)
            flops += sum(s.flops for s in blocks) * (trips if trips is not None else 1)
            if trips is None:
                self.info.flops_exact = False
        elif name in ("stablehlo.case", "stablehlo.if") and blocks:
            flops += max(s.flops for s in blocks)
        # other regions (reduce, sort, scatter, map, ...) hold a scalar combiner: counted per element
        return extra, flops

    def _op_flops(self, op: Any) -> int:
        name = op.operation.name
        if name in NO_FLOP_OPS or name.startswith("func."):
            return 0
        results = sum(self.types.size(r.type)[1] for r in op.results)
        if name in ("stablehlo.dot_general", "stablehlo.dot"):
            lhs = op.operands[0].type.maybe_downcast()
            if name == "stablehlo.dot":
                contracted = lhs.shape[-1] if lhs.rank else 1
            else:
                attr = str(op.attributes["dot_dimension_numbers"])[:2000]
                m = re.search(r"lhs_contracting_dimensions = \[([\d, ]*)\]", attr)
                dims = [int(d) for d in m.group(1).split(",") if d.strip()] if m else []
                contracted = math.prod(lhs.shape[d] for d in dims if 0 <= d < lhs.rank)
            return 2 * results * contracted
        if name == "stablehlo.convolution":
            rhs = op.operands[1].type.maybe_downcast()
            attr = str(op.attributes["dimension_numbers"])[:2000] if "dimension_numbers" in op.attributes else ""
            m = re.search(r"x\[([^\]]*)\]->", attr)
            kernel = [s.strip() for s in m.group(1).split(",")] if m else []
            out_features = rhs.shape[kernel.index("o")] if "o" in kernel and len(kernel) == rhs.rank else 1
            return cast(int, 2 * results * (math.prod(rhs.shape) // max(1, out_features)))  # untyped MLIR shape
        if name in (
            "stablehlo.reduce",
            "stablehlo.reduce_window",
            "stablehlo.scatter",
            "stablehlo.select_and_scatter",
            "stablehlo.sort",
            "stablehlo.map",
        ):
            return sum(self.types.size(v.type)[1] for v in op.operands)
        return results

    def _trip_count(self, op: Any) -> int | None:
        """Iterations of a `while` that JAX emitted for a scan or fori_loop: its condition is
        `compare LT, counter, constant` with the counter starting from a constant. None otherwise."""
        cond = op.regions[0].blocks[0] if len(op.regions) and len(op.regions[0].blocks) else None
        if cond is None:
            return None
        ops = list(cond.operations)
        if len(ops) < 2 or ops[-1].operation.name != "stablehlo.return":
            return None
        flag = ops[-1].operands[0]
        compare = _defining_op(flag)
        if (
            compare is None
            or compare.operation.name != "stablehlo.compare"
            or "LT" not in str(compare.attributes["comparison_direction"])[:100]
        ):
            return None
        counter, bound = compare.operands[0], compare.operands[1]
        stop = _constant_int(bound)
        index = _block_arg_index(counter, cond)
        if stop is None or index is None or index >= len(op.operands):
            return None
        start = _constant_int(op.operands[index])
        if start is None:
            return None
        return max(0, min(stop - start, MAX_TRIP_COUNT))


def _defining_op(value: Any) -> Any | None:
    owner = value.owner
    ir = _ir()
    if isinstance(owner, ir.Block):
        return None
    return owner


def _block_arg_index(value: Any, block: Any) -> int | None:
    ir = _ir()
    if isinstance(value.owner, ir.Block) and value.owner == block:
        return cast(int, ir.BlockArgument(value).arg_number)  # the MLIR bindings are untyped (Any)
    return None


def _constant_int(value: Any) -> int | None:
    """The integer a scalar `stablehlo.constant` holds, or None."""
    ir = _ir()
    op = _defining_op(value)
    if op is None or op.operation.name != "stablehlo.constant":
        return None
    try:
        attr = ir.DenseIntElementsAttr(op.attributes["value"])
        if len(attr) != 1:
            return None
        return int(attr[0])
    except Exception:  # noqa: BLE001 - an attribute of a forged module that is not what it claims
        return None


# --- provenance -----------------------------------------------------------------------------------

MAX_PROVENANCE_STEPS = 10_000


def _provenance(value: Any, main_block: Any, functions: dict[str, Any]) -> str:
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
    ir = _ir()
    calls: list[Any] = []  # the func.call ops we are inside, innermost last
    visited: set[tuple[Any, int]] = set()
    for _ in range(MAX_PROVENANCE_STEPS):
        key = (value, len(calls))
        if key in visited:
            return "a loop-carried value"
        visited.add(key)
        owner = value.owner
        if isinstance(owner, ir.Block):
            index = ir.BlockArgument(value).arg_number
            parent = owner.owner  # the op holding the region (func.func, while, case, ...)
            pname = parent.operation.name if parent is not None else ""
            if owner == main_block and not calls:
                return f"argument {index}"
            if pname == "func.func" and calls:
                call = calls.pop()
                if index >= len(call.operands):
                    return "an argument"
                value = call.operands[index]
                continue
            if pname == "stablehlo.while":
                body = parent.regions[1].blocks[0] if len(parent.regions) > 1 else None
                carried = _returned(body, index) if body is not None else None
                if carried is not None and carried != value:
                    value = carried
                elif index < len(parent.operands):
                    value = parent.operands[index]
                else:
                    return "a loop-carried value"
                continue
            return "a block argument"
        op = owner
        name: str = op.operation.name  # (the MLIR bindings are untyped)
        result_index = ir.OpResult(value).result_number
        if name == "func.call":
            callee = functions.get(_callee(op) or "")
            returned = _returned(callee.regions[0].blocks[0], result_index) if callee is not None else None
            if returned is None:
                return "a call"
            calls.append(op)
            value = returned
            continue
        if name in MOVE_OPS and len(op.operands):
            value = op.operands[0]
            continue
        if name in ALIASING_OPS and result_index < len(op.operands):
            value = op.operands[result_index]
            continue
        if name == "stablehlo.dynamic_update_slice" and len(op.operands) > 1:
            value = op.operands[1]
            continue
        if name == "stablehlo.while" and len(op.regions) > 1:
            returned = _returned(op.regions[1].blocks[0], result_index)
            if returned is None:
                return "a loop"
            value = returned
            continue
        if name in ("stablehlo.case", "stablehlo.if") and len(op.regions):
            returned = _returned(op.regions[0].blocks[0], result_index)
            if returned is None:
                return "a branch"
            value = returned
            continue
        return name.split(".", 1)[-1]
    return "a long chain of operations"


def _returned(block: Any, index: int) -> Any | None:
    ops = list(block.operations)
    if not ops or index >= len(ops[-1].operands):
        return None
    return ops[-1].operands[index]


_shared = threading.local()


@contextlib.contextmanager
def shared_ir_context() -> Iterator[None]:
    """Within the block, `inspect_module` and `normalized_digest` on this thread parse every module
    in one MLIR context instead of one each (making a context costs about 5 ms of CPU). The context,
    and everything parsed in it, is dropped when the block ends: use it around the artifacts of
    one submission, not for a process's lifetime."""
    from jax._src.interpreters import mlir as jax_mlir

    previous = getattr(_shared, "context", None)
    _shared.context = jax_mlir.make_ir_context()
    try:
        yield
    finally:
        _shared.context = previous


def _ir_context() -> Any:
    """The thread's shared context (`shared_ir_context`), else a new one."""
    from jax._src.interpreters import mlir as jax_mlir

    context = getattr(_shared, "context", None)
    return context if context is not None else jax_mlir.make_ir_context()


def _parse(exported: Any) -> Any:
    """The artifact's StableHLO module, parsed from its bytecode (call inside `_ir_context()`).

    Raises:
        ArtifactError: the bytes are not a module the bindings can read.
    """
    from jax._src.lib import _jax

    try:
        return _jax.mlir.deserialize_portable_artifact(exported.mlir_module_serialized)
    except Exception as exc:  # noqa: BLE001 - the MLIR parser raises many kinds on a forged module
        raise ArtifactError(f"cannot parse the module: {type(exc).__name__}"[:500]) from None


def _calling_facts(exported: Any) -> dict[str, Any]:
    """What, besides the module, decides how an artifact is called and what it computes."""

    def avals(seq: Any) -> list[Any]:
        return [[[str(d) for d in a.shape], str(a.dtype), bool(getattr(a, "weak_type", False))] for a in seq]

    return {
        "in_avals": avals(exported.in_avals),
        "out_avals": avals(exported.out_avals),
        "in_tree": str(exported.in_tree),
        "out_tree": str(exported.out_tree),
        "platforms": [str(p) for p in exported.platforms],
        "nr_devices": int(exported.nr_devices),
        "in_shardings_hlo": [str(s) for s in exported.in_shardings_hlo],
        "out_shardings_hlo": [str(s) for s in exported.out_shardings_hlo],
        "ordered_effects": [str(e) for e in exported.ordered_effects],
        "unordered_effects": [str(e) for e in exported.unordered_effects],
        "disabled_safety_checks": [str(c) for c in exported.disabled_safety_checks],
        "calling_convention_version": int(exported.calling_convention_version),
        "module_kept_var_idx": [int(i) for i in exported.module_kept_var_idx],
        "uses_global_constants": bool(exported.uses_global_constants),
    }


def _module_digest(module: Any, exported: Any) -> str:
    """sha256 of `module` without debug locations and of `_calling_facts(exported)`.

    Strips locations in place (`strip-debuginfo`; the module is not read afterwards) and hashes
    the module's bytecode rather than its text: bytecode is a faithful, deterministic encoding
    whose size stays that of the artifact, while text repeats uniqued attributes at every use (a
    1 MB artifact can print as gigabytes).
    """
    from jax._src.lib.mlir import passmanager

    passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(module.operation)
    bytecode = io.BytesIO()
    module.operation.write_bytecode(bytecode)
    h = hashlib.sha256(b"remat-judge normalized artifact\0")
    h.update(json.dumps(_calling_facts(exported), sort_keys=True, separators=(",", ":")).encode())
    h.update(b"\0")
    h.update(bytecode.getvalue())
    return h.hexdigest()


def normalized_digest(exported: Any) -> str:
    """A content digest of one artifact that ignores where its code came from.

    sha256 over the StableHLO module with every debug location stripped (source files, lines,
    function and scope names only live there) and over what decides how it is called: input and
    output avals, pytree structures, platforms, number of devices, shardings, effects, calling
    convention and kept inputs. Exporting the same function twice (in two processes, or from a
    file with other comments or line numbers) gives the same digest; a different computation
    (another checkpoint policy, say) a different one. Linear in the artifact's size: the module is
    parsed from bytecode and hashed as bytecode, never printed (see `_module_digest`).
    `inspect_module` computes the same value as `ModuleInfo.digest` on the module it parses.

    Args:
        exported: a deserialized `jax.export.Exported`.

    Returns:
        64 lowercase hex digits.

    Raises:
        ArtifactError: the module cannot be parsed.
    """
    with _ir_context():
        return _module_digest(_parse(exported), exported)


MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")  # what `mhlo.memory_kind` may say (JAX's names)


def _result_memory_kinds(main: Any, n_results: int) -> list[str]:
    """Per result of `main`, its `mhlo.memory_kind` result attribute ("device" when unmarked).

    Raises:
        ArtifactError: a memory kind the judge does not know (a forged attribute).
    """
    ir = _ir()
    kinds = ["device"] * n_results
    if "res_attrs" not in main.attributes:
        return kinds
    for i, attrs in enumerate(ir.ArrayAttr(main.attributes["res_attrs"])):
        if i >= n_results:
            break
        attrs = ir.DictAttr(attrs)
        if "mhlo.memory_kind" in attrs:
            kind = ir.StringAttr(attrs["mhlo.memory_kind"]).value
            if kind not in MEMORY_KINDS:
                raise ArtifactError(f"result {i} is left in memory of an unknown kind {kind[:40]!r}")
            kinds[i] = kind
    return kinds


def inspect_module(
    exported: Any, *, allowed_custom_calls: frozenset[str] = frozenset(), limits: ReadLimits = ReadLimits()
) -> ModuleInfo:
    """Parses an Exported's StableHLO module from bytecode and inspects it without running it.

    Args:
        exported: a deserialized `jax.export.Exported`.
        allowed_custom_calls: custom_call targets permitted (a problem may allow some).
        limits: caps on ops, region nesting and call depth, enforced during the walk.

    Returns:
        ModuleInfo with op counts and disallowed ops; when nothing is disallowed, also peak live
        bytes, FLOPs, the provenance of `main`'s outputs and the artifact's `normalized_digest`.

    Raises:
        ArtifactError: the module cannot be parsed, has no public `main`, exceeds a cap, or has a
            value of dynamic shape or unknown type.
    """
    ir = _ir()
    info = ModuleInfo()
    with _ir_context():
        module = _parse(exported)
        functions: dict[str, Any] = {}
        for top in module.body.operations:
            if top.operation.name != "func.func":
                info.disallowed.append(top.operation.name[:80])
                continue
            functions[ir.StringAttr(top.attributes["sym_name"]).value] = top
            if len(functions) > limits.max_ops:
                raise ArtifactError(f"the program has more than {limits.max_ops:,} functions")
        info.functions = len(functions)
        reader = _Reader(functions, limits, allowed_custom_calls, info)
        reader.scan()
        if "main" not in functions:
            raise ArtifactError("the module has no main function")
        if info.disallowed:  # only walk modules we would run
            return info
        for name in reader.call_order():
            reader.function_summary[name] = reader.walk_function(name)
        main = reader.function_summary["main"]
        info.peak_live_bytes, info.flops = main.peak, main.flops
        main_block = functions["main"].regions[0].blocks[0]
        returned = list(main_block.operations)[-1].operands
        info.sources = [_provenance(v, main_block, functions) for v in returned]
        info.memory_kinds = _result_memory_kinds(functions["main"], len(returned))
        info.digest = _module_digest(module, exported)  # it strips the module's locations
        info.program_digest = _program_digest(module, exported)  # last: it renames the module's functions
    return info


NAME_ATTRIBUTES = ("jax.arg_info", "jax.result_info")  # Python argument and result names JAX records


def _program_digest(module: Any, exported: Any) -> str:
    """sha256 of `module` (its debug locations already stripped) with its private functions
    renamed `__f0`, `__f1`, ... in module order (a helper called `layer` or `lay` lowers to
    `@layer` or `@lay`) and the argument and result names JAX records removed, and of its
    calling facts. What stays visible: every op, its operands' order, shapes, dtypes, constants
    and attributes, and the call structure. So renaming variables or functions, reformatting, or
    comments leave it unchanged; inlining a helper by hand, reordering independent statements
    (which changes op order), or another way to write the same policy change it. Modifies
    `module` in place.
    """
    ir = _ir()
    functions = [op for op in module.body.operations if op.operation.name == "func.func"]
    renamed = 0
    for function in functions:
        name = ir.StringAttr(function.attributes["sym_name"]).value
        if name == "main":
            continue
        canonical = f"__f{renamed}"
        renamed += 1
        ir.SymbolTable.replace_all_symbol_uses(name, canonical, module.operation)
        ir.SymbolTable.set_symbol_name(function, canonical)
    for function in functions:
        for key in ("arg_attrs", "res_attrs"):
            if key not in function.attributes:
                continue
            kept = []
            for attrs in ir.ArrayAttr(function.attributes[key]):
                attrs = ir.DictAttr(attrs)
                kept.append(
                    ir.DictAttr.get(
                        {
                            attrs[i].name: attrs[i].attr
                            for i in range(len(attrs))
                            if attrs[i].name not in NAME_ATTRIBUTES
                        }
                    )
                )
            function.attributes[key] = ir.ArrayAttr.get(kept)
    bytecode = io.BytesIO()
    module.operation.write_bytecode(bytecode)
    h = hashlib.sha256(b"remat-judge program\0")
    h.update(json.dumps(_calling_facts(exported), sort_keys=True, separators=(",", ":")).encode())
    h.update(b"\0")
    h.update(bytecode.getvalue())
    return h.hexdigest()
