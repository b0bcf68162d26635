"""Whether an op of a backward program keeps its result linear in the cotangent.

A VJP's backward pass is a linear map of the cotangent: every value it computes from a cotangent is
a sum of products of the cotangent with values computed from the residuals alone (JAX transposes a
linear program; a hand-written `custom_vjp` returns the same map). An op that adds a value computed
from the residuals to one computed from the cotangent, multiplies two values computed from the
cotangent, or applies a nonlinear function to one, leaves that class: its result is MIXED, and
everything computed from it is forward work with a cotangent mixed in, which the FLOP counter
(`graders.untrusted.flops`) counts as work on the residuals alone. `sin(x + 1e-30 * sum(g))` is
then seen for what it is, a recomputed `sin(x)`, where the split by dependence alone would call it
cotangent work. A program that never leaves the class (every correct backward pass the bank and
the held-out styles hold) is counted as before.

What a hand-written backward pass may do to its cotangent and stay correct is a little wider:
positively homogeneous maps. A NaN guard `where(isfinite(g), g, 0)`, a relu of the cotangent
`maximum(g, 0)` or `g * (g > 0)`, `abs(g)`: scaling g by a positive number scales the result by the
same number. A comparison of a cotangent value with zero (or with another one), its sign and
whether it is finite are SIGN (unchanged by that scale); a select on a SIGN, a product with one,
and a maximum or minimum with zero keep a linear value linear.
"""

from __future__ import annotations

from typing import Any

from graders.untrusted.fold import MIXED, SIGN, TAINTED, Fact
from graders.untrusted.ops import MOVE_OPS

# the result is linear when every operand that is not a constant is linear (a cotangent's value)
_ALL_LINEAR = (
    frozenset(
        f"stablehlo.{name}"
        for name in (
            "add subtract negate concatenate pad reverse slice real imag complex copy tuple get_tuple_element "
            "reduce_precision optimization_barrier"
        ).split()
    )
    | MOVE_OPS
    # collectives that move values between devices: a gathered, permuted or exchanged cotangent
    | {"stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast"}
)

# the result is linear when exactly one operand is linear and the others depend on no cotangent
_ONE_LINEAR = frozenset({"stablehlo.multiply", "stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})

# data at some operands, indices or predicates at the others: linear when the data is linear (or
# constant) and no index or predicate depends on a cotangent
_DATA_OPERANDS = {
    "stablehlo.dynamic_slice": (0,),
    "stablehlo.gather": (0,),
    "stablehlo.dynamic_update_slice": (0, 1),
    "stablehlo.select": (1, 2),
}

# reductions whose body only adds (or, for scatter, only assigns): linear in the reduced values
_REDUCING = frozenset(
    {"stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter", "stablehlo.select_and_scatter"}
)
_ADDING_BODY = frozenset({"stablehlo.add", "stablehlo.return"})
# collectives that reduce across devices: linear in what they sum, like `add`, when their body adds
_SUMMING_COLLECTIVES = frozenset({"stablehlo.all_reduce", "stablehlo.reduce_scatter"})
MAX_BODY_OPS = 8


def _involves(fact: Fact) -> bool:
    return fact is TAINTED or fact is MIXED or fact is SIGN


def _adds_only(op: Any) -> bool:
    """Whether every region of `op` only adds or passes a value on (a sum or an assignment)."""
    for region in op.regions:
        for block in region.blocks:
            names = [inner.operation.name for _, inner in zip(range(MAX_BODY_OPS + 1), block.operations, strict=False)]
            if len(names) > MAX_BODY_OPS or not set(names) <= _ADDING_BODY:
                return False
    return True


def _constant(fact: Fact) -> bool:
    return isinstance(fact, (int, float))


def _linear_reduction(op: Any, name: str, ins: list[Fact]) -> bool:
    """A reduction, window reduction or scatter that sums: its data may be linear, its initial
    values constant, its indices free of cotangents."""
    if not _adds_only(op):
        return False
    if name == "stablehlo.scatter":
        n = (len(ins) - 1) // 2  # inputs..., indices, updates...
        data = ins[:n] + ins[n + 1 :]
        return not _involves(ins[n]) and all(f is TAINTED or _constant(f) for f in data)
    if name == "stablehlo.select_and_scatter":  # operand (the forward's input), source, init value
        return len(ins) == 3 and not _involves(ins[0]) and ins[1] is TAINTED and not _involves(ins[2])
    half = len(ins) // 2  # inputs..., init values...
    return all(f is TAINTED or _constant(f) for f in ins[:half]) and all(not _involves(f) for f in ins[half:])


def _zero(fact: Fact) -> bool:
    return _constant(fact) and fact == 0


def _scale_free(fact: Fact) -> bool:
    """Unchanged by a positive scale of the cotangent: SIGN, a constant or no cotangent at all."""
    return fact is SIGN or not _involves(fact)


_SIGN_OF = frozenset({"stablehlo.is_finite", "stablehlo.sign"})
_LOGIC = frozenset({"stablehlo.not", "stablehlo.and", "stablehlo.or", "stablehlo.xor"})
_EXTREMES = frozenset({"stablehlo.maximum", "stablehlo.minimum"})


def _homogeneous(name: str, ins: list[Fact]) -> Fact:
    """The fact of an op that reads a SIGN, or that a positive scale of the cotangent passes
    through (see the module docstring), or MIXED."""
    if name == "stablehlo.compare":
        both = len(ins) == 2 and all(f is TAINTED or _zero(f) for f in ins) and any(f is TAINTED for f in ins)
        return SIGN if both or all(_scale_free(f) for f in ins) else MIXED
    if name in _SIGN_OF | _LOGIC or name in MOVE_OPS:
        return (
            SIGN
            if all(f is TAINTED or _scale_free(f) for f in ins) and (name in _SIGN_OF or TAINTED not in ins)
            else MIXED
        )
    if name == "stablehlo.select" and len(ins) == 3 and _scale_free(ins[0]):
        if all(f is TAINTED or _zero(f) for f in ins[1:]) and TAINTED in ins[1:]:
            return TAINTED
        return SIGN if all(_scale_free(f) for f in ins[1:]) else MIXED
    if name in _ONE_LINEAR:
        linear = sum(f is TAINTED for f in ins)
        if all(f is TAINTED or _scale_free(f) for f in ins) and linear <= 1:
            return TAINTED if linear else SIGN
        return MIXED
    if name in _EXTREMES and all(f is TAINTED or _zero(f) for f in ins) and TAINTED in ins:
        return TAINTED
    if name == "stablehlo.abs" and ins == [TAINTED]:
        return TAINTED
    return MIXED


def cotangent_fact(op: Any, name: str, ins: list[Fact]) -> Fact:
    """The fact of the results of `op`, some of whose operand facts `ins` depend on a cotangent:
    TAINTED when the op keeps them linear in it, SIGN or TAINTED for the positively homogeneous
    maps of the module docstring, MIXED otherwise."""
    if any(f is MIXED for f in ins):
        return MIXED
    if (
        any(f is SIGN for f in ins)
        or name in _SIGN_OF | _LOGIC | _EXTREMES
        or name
        in (
            "stablehlo.compare",
            "stablehlo.abs",
        )
    ):
        return _homogeneous(name, ins)
    if name in _ALL_LINEAR:
        linear = all(f is TAINTED or _constant(f) for f in ins)
    elif name in _ONE_LINEAR:
        linear = sum(f is TAINTED for f in ins) == 1
    elif name == "stablehlo.divide":
        linear = len(ins) == 2 and ins[0] is TAINTED and not _involves(ins[1])
    elif name in _REDUCING:
        linear = _linear_reduction(op, name, ins)
    elif name in _SUMMING_COLLECTIVES:
        linear = _adds_only(op) and all(f is TAINTED or _constant(f) for f in ins)
    elif name in _DATA_OPERANDS:
        data = _DATA_OPERANDS[name]
        linear = all(ins[i] is TAINTED or _constant(ins[i]) for i in data if i < len(ins)) and all(
            not _involves(f) for i, f in enumerate(ins) if i not in data
        )
    else:
        linear = False
    return TAINTED if linear else MIXED


def joined_fact(mixed: bool, branches: list[Fact]) -> Fact:
    """The fact of a result one of several branches gives: MIXED if `mixed` or any branch's is,
    else TAINTED if any branch's depends on a cotangent, else not known."""
    if mixed or any(f is MIXED for f in branches):
        return MIXED
    return TAINTED if any(f is TAINTED or f is SIGN for f in branches) else None


def carried_fact(before: Fact, after: Fact) -> Fact:
    """A loop-carried value's fact for the next walk of the body: MIXED stays MIXED; a value the
    body makes depend on a cotangent, linearly or not, becomes TAINTED (an accumulator starts out
    unknown, so its first `acc + g` looks affine: the next walk sees it linear)."""
    if before is MIXED:
        return MIXED
    return TAINTED if before is TAINTED or after is TAINTED or after is MIXED or after is SIGN else None
