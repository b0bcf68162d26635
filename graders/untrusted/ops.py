"""The allowlist and cost classes of the StableHLO and CHLO operations an untrusted program may
hold, the bounds on what is believed of it, and one op's own FLOPs (`op_flops`)."""

from __future__ import annotations

import math
import re
from typing import Any, cast

from graders.untrusted.mesh_ops import COLLECTIVE_OPS, SHARDING_OPS

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
    | SHARDING_OPS
)


NO_FLOP_OPS = (
    MOVE_OPS
    | {
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
        "sdy.return",
    }
    | COLLECTIVE_OPS
)  # communication: counted from the compiled program, not as FLOPs


MAX_TRIP_COUNT = 1 << 30  # a loop bound read from a constant is believed up to this


MAX_SYMBOL_CHARS = 1024  # longest function name accepted


MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")  # what `mhlo.memory_kind` may say (JAX's names)


NAME_ATTRIBUTES = ("jax.arg_info", "jax.result_info")  # Python argument and result names JAX records


MAX_PROVENANCE_STEPS = 10_000


def op_flops(op: Any, size: Any) -> int:
    """One op's own FLOPs: 2·(result elements)·(contracted size) for dot and convolution, the
    operand elements for reductions, sorts and scatters, one per result element otherwise,
    none for data movement. `size` gives (bytes, elements) of a type (`_Types.size`)."""
    name = op.operation.name
    if name in NO_FLOP_OPS or name.startswith("func."):
        return 0
    results = sum(size(r.type)[1] for r in op.results)
    if name in ("stablehlo.dot_general", "stablehlo.dot"):
        lhs = op.operands[0].type.maybe_downcast()
        if name == "stablehlo.dot":
            contracted = lhs.shape[-1] if lhs.rank else 1
        else:
            attr = str(op.attributes["dot_dimension_numbers"])[:2000]
            m = re.search(r"lhs_contracting_dimensions = \[([\d, ]*)\]", attr)
            dims = [int(d) for d in m.group(1).split(",") if d.strip()] if m else []
            contracted = math.prod(lhs.shape[d] for d in dims if 0 <= d < lhs.rank)
        return cast(int, 2 * results * contracted)  # untyped MLIR shapes
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
        return sum(cast(int, size(v.type)[1]) for v in op.operands)
    return cast(int, results)
