"""Reading exported StableHLO artifacts: deserialization, the op allowlist, and peak live bytes.

Runs in the trusted verifier process on untrusted artifacts, before any of them is executed.
Uses the MLIR Python bindings that ship with jaxlib (`jax._src.lib.mlir`, pinned with JAX 0.10.2)
to parse the module text that `Exported.mlir_module()` returns, the same module `call` compiles.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# Pure computation: the ops a differentiated numerical function may contain. Everything else is
# rejected before the artifact runs, in particular custom_call (host callbacks, FFI), infeed,
# outfeed, send, recv, tokens and collectives.
STABLEHLO_PURE_OPS = frozenset("""
abs add and atan2 batch_norm_grad batch_norm_inference batch_norm_training bitcast_convert broadcast
broadcast_in_dim case cbrt ceil cholesky clamp compare complex concatenate constant convert convolution
cosine count_leading_zeros divide dot dot_general dynamic_slice dynamic_update_slice einsum exponential
exponential_minus_one fft floor gather get_tuple_element if imag iota is_finite log log_plus_one logistic
map maximum minimum multiply negate not optimization_barrier or pad popcnt power real reduce
reduce_precision reduce_window remainder reshape return reverse rng rng_bit_generator round_nearest_afz
round_nearest_even rsqrt scatter select select_and_scatter shift_left shift_right_arithmetic
shift_right_logical sign sine slice sort sqrt subtract tan tanh transpose triangular_solve tuple
unary_einsum while xor
""".split())
CHLO_PURE_OPS = frozenset("""
acos acosh asin asinh atan atanh bessel_i0e bessel_i1e conj constant constant_like cosh digamma erf
erf_inv erfc is_inf is_neg_inf is_pos_inf lgamma next_after polygamma sinh square tan top_k zeta
""".split())
ALLOWED_OPS = frozenset(
    {f"stablehlo.{op}" for op in STABLEHLO_PURE_OPS}
    | {f"chlo.{op}" for op in CHLO_PURE_OPS}
    | {"func.func", "func.call", "func.return"}
)
ALIASING_OPS = frozenset({"stablehlo.optimization_barrier"})  # results are their operands, no new memory


class ArtifactError(Exception):
    """An artifact cannot be deserialized or parsed (a forged or corrupt bundle)."""


@dataclass(frozen=True)
class Aval:
    """Shape and dtype of one array. `nbytes` in bytes (bool as one byte, as XLA stores it)."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        from graders.problem import _np_dtype

        return math.prod(self.shape) * _np_dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@dataclass
class ModuleInfo:
    """What static inspection found in one artifact.

    Attributes:
        op_counts: how many of each op (by full name, e.g. "stablehlo.dot_general").
        disallowed: op names (or `custom_call @target`) outside the allowlist, sorted.
        peak_live_bytes: the most bytes live at once when ops run in program order (see
            `peak_live_bytes`).
        functions: number of functions in the module.
    """

    op_counts: Counter[str] = field(default_factory=Counter)
    disallowed: list[str] = field(default_factory=list)
    peak_live_bytes: int = 0
    functions: int = 0

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
    except Exception as exc:  # the flatbuffer parser raises many kinds on corrupt input
        raise ArtifactError(f"not a jax.export artifact: {type(exc).__name__}: {exc}"[:500]) from None


def flat_call(exported: Any) -> Any:
    """A jitted `f(*input_leaves) -> [*output_leaves]` for a deserialized artifact, whatever pytrees
    its exporter used (the runner exports flat lists; a forged artifact might not)."""
    import jax

    called = jax.jit(exported.call)

    def call(*leaves: Any) -> list[Any]:
        args, kwargs = jax.tree_util.tree_unflatten(exported.in_tree, list(leaves))
        return jax.tree_util.tree_leaves(called(*args, **kwargs))

    return call


def exported_avals(avals: Any) -> list[Aval]:
    """`Exported.in_avals` / `out_avals` as our Aval list."""
    return [Aval(tuple(int(d) for d in a.shape), str(a.dtype)) for a in avals]


# --- MLIR ------------------------------------------------------------------------------------

def _ir() -> Any:
    from jax._src.lib.mlir import ir

    return ir


def _type_bytes(t: Any) -> int:
    """Bytes of a value of MLIR type `t`: tensors by shape and element width, tuples summed,
    tokens and anything unknown as 0."""
    ir = _ir()
    t = t.maybe_downcast()
    if isinstance(t, ir.RankedTensorType):
        if not t.has_static_shape:
            return 0
        return math.prod(t.shape) * _element_bytes(t.element_type)
    if isinstance(t, ir.TupleType):
        return sum(_type_bytes(t.get_type(i)) for i in range(t.num_types))
    return 0


def _element_bytes(e: Any) -> int:
    ir = _ir()
    e = e.maybe_downcast()
    if isinstance(e, ir.ComplexType):
        return 2 * _element_bytes(e.element_type)
    if isinstance(e, (ir.IntegerType, ir.FloatType)):
        return max(1, (e.width + 7) // 8)
    return 0


def _nested_operands(op: Any, out: list[Any]) -> None:
    """Every operand used inside the regions of `op` (values defined outside stay live until `op`)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                out.extend(inner.operands)
                _nested_operands(inner, out)


def _callee(op: Any) -> str | None:
    """The function `op` runs: `func.call`'s callee, or a composite's decomposition."""
    ir = _ir()
    name = op.operation.name
    if name == "func.call":
        return ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    if name == "stablehlo.composite":
        return ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value
    return None


class _PeakWalker:
    """Computes peak live bytes per function and region, memoised by function name."""

    def __init__(self, functions: dict[str, Any]):
        self.functions = functions
        self.memo: dict[str, tuple[int, int]] = {}
        self.active: set[str] = set()

    def function(self, name: str) -> tuple[int, int]:
        """(peak bytes, bytes of its arguments) of the function called `name`."""
        if name in self.memo:
            return self.memo[name]
        if name in self.active or name not in self.functions:
            raise ArtifactError(f"call to unknown or recursive function @{name}")
        self.active.add(name)
        region = self.functions[name].regions[0]
        result = self.region(region)
        self.active.discard(name)
        self.memo[name] = result
        return result

    def region(self, region: Any) -> tuple[int, int]:
        """(peak bytes, argument bytes) of the first block of `region`, ops in program order.

        A value's bytes count from the op that defines it until the op that last uses it (uses
        inside nested regions count as uses by the op holding the region). Block arguments are
        live from the start. An op's results and the extra memory of what it calls or contains
        (callee or region peak minus its arguments, which alias the operands) are live together
        with everything already live.
        """
        if not region.blocks:
            return 0, 0
        block = region.blocks[0]
        ops = list(block.operations)
        last_use: dict[Any, int] = {}
        for i, op in enumerate(ops):
            used = list(op.operands)
            _nested_operands(op, used)
            for v in used:
                last_use[v] = i
        dies_at: dict[int, list[Any]] = {}
        for v, i in last_use.items():
            dies_at.setdefault(i, []).append(v)
        buffer_of: dict[Any, int] = {}
        buffer_bytes: dict[int, int] = {}
        buffer_refs: dict[int, int] = {}

        def define(value: Any, buffer: int | None = None) -> int:
            if buffer is None:
                buffer = len(buffer_bytes)
                buffer_bytes[buffer] = _type_bytes(value.type)
                buffer_refs[buffer] = 0
            buffer_of[value] = buffer
            buffer_refs[buffer] += 1
            return buffer_bytes[buffer] if buffer_refs[buffer] == 1 else 0

        live = 0
        for arg in block.arguments:
            live += define(arg)
        arg_bytes = live
        peak = live

        def release(value: Any) -> int:
            buffer = buffer_of.pop(value, None)
            if buffer is None:
                return 0
            buffer_refs[buffer] -= 1
            return buffer_bytes[buffer] if buffer_refs[buffer] == 0 else 0

        for arg in block.arguments:  # arguments nobody uses are dead at once
            if arg not in last_use:
                live -= release(arg)
        for i, op in enumerate(ops):
            name = op.operation.name
            extra = 0
            callee = _callee(op)
            if callee is not None:
                callee_peak, callee_args = self.function(callee)
                extra = callee_peak - callee_args
            for inner_region in op.regions:
                region_peak, region_args = self.region(inner_region)
                extra = max(extra, region_peak - region_args)
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
                if result not in last_use:
                    live -= release(result)
        return peak, arg_bytes


def inspect_module(exported: Any, *, allowed_custom_calls: frozenset[str] = frozenset()) -> ModuleInfo:
    """Parses an Exported's StableHLO module and inspects it without running it.

    Args:
        exported: a deserialized `jax.export.Exported`.
        allowed_custom_calls: custom_call targets permitted (a problem may allow some).

    Returns:
        ModuleInfo with op counts, disallowed ops and the peak live bytes of `main`.

    Raises:
        ArtifactError: the module cannot be parsed or has no public `main`.
    """
    from jax._src.interpreters import mlir as jax_mlir

    ir = _ir()
    info = ModuleInfo()
    try:
        text = exported.mlir_module()
    except Exception as exc:
        raise ArtifactError(f"cannot read the module: {type(exc).__name__}: {exc}"[:500]) from None
    with jax_mlir.make_ir_context():
        try:
            module = ir.Module.parse(text)
        except Exception as exc:
            raise ArtifactError(f"cannot parse the module: {type(exc).__name__}"[:500]) from None
        functions: dict[str, Any] = {}
        for top in module.body.operations:
            if top.operation.name != "func.func":
                info.disallowed.append(top.operation.name)
                continue
            functions[ir.StringAttr(top.attributes["sym_name"]).value] = top
        info.functions = len(functions)

        def visit(op: Any) -> None:
            name = op.operation.name
            info.op_counts[name] += 1
            if name == "stablehlo.custom_call":
                target = ir.StringAttr(op.attributes["call_target_name"]).value
                if target not in allowed_custom_calls:
                    info.disallowed.append(f"stablehlo.custom_call @{target}")
            elif name == "stablehlo.composite":
                # JAX 0.10.2 exports erf and top_k as composites with a pure decomposition, which is
                # itself a function of the module (and so checked like every function).
                composite = ir.StringAttr(op.attributes["name"]).value
                if composite not in ALLOWED_OPS:
                    info.disallowed.append(f"stablehlo.composite {composite!r}")
            elif name not in ALLOWED_OPS:
                info.disallowed.append(name)
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        visit(inner)

        for fn in functions.values():
            visit(fn)
        info.disallowed = sorted(set(info.disallowed))
        if "main" not in functions:
            raise ArtifactError("the module has no main function")
        if not info.disallowed:  # only walk modules we would run
            info.peak_live_bytes = _PeakWalker(functions).function("main")[0]
    return info
