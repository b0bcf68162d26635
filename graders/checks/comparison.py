"""What every check reads and how it compares: one case's reference expectation next to what the
submission did (`CaseRun`), arrays compared under a tolerance (`compare_arrays`, `compare_calibrated`),
and bytes written for people (`human_bytes`)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from graders.problems.spec import Tolerance
from graders.reference.expectation import CaseExpectation
from graders.verdict import ResidualFact

if TYPE_CHECKING:
    from graders.untrusted.result import ModuleInfo

_PLACEHOLDER = re.compile(r"\{residual (\d+)\}")


def residual_name(residual: ResidualFact) -> str:
    """How a message names a saved value: `saved f32[8,64] (argument x)`."""
    return f"saved {residual.short()}" + (f" ({residual.source})" if residual.source else "")


MAX_BRANCH_INDEX_ELEMENTS = 256  # elements of branch indices one program may leave out, in all
BOOKKEEPING_ELEMENTS = 256  # the most elements of one value computed without the data left out
LOOP_BOOKKEEPING = "no input's data flows into it (a loop counter, an index or a PRNG key)"
BRANCH_BOOKKEEPING = "a branch index: the backward pass only uses it to pick a branch"


def bookkeeping_reasons(
    facts: Sequence[ResidualFact], depends: Sequence[bool], selectors: Sequence[bool]
) -> list[str | None]:
    """Why each residual is bookkeeping, or None where it is a residual like any other.

    Whether a value carries information about the inputs is read from the artifacts, never from
    its dtype or size (docs/ARCHITECTURE.md, "Bookkeeping residuals"). An integer or boolean
    residual is left out of comparisons and budgets when
    - no floating-point argument's data flows into it in the forward program (`depends`, per
      residual: `ModuleInfo.depends_on_arguments`) and it has at most `BOOKKEEPING_ELEMENTS`
      elements: a `fori_loop`'s counter (i32[] and its stacked i32[n], measured with jax
      0.10.2), a scan's indices, a PRNG key split from a key argument (uint32[2]). Such a value
      holds no activation; the size bound only keeps real memory (a dropout mask drawn from a key,
      bool[N, h]) in the budgets; or
    - it depends on the data but the backward program uses it only as a `case` index or `if`
      predicate (`selectors`, per residual: `ModuleInfo.selector_arguments`): a `lax.cond` on
      data saves its branch index as i32[] (stacked per iteration in a scan). Such a value carries
      at most log2(branches) bits per element, so at most `MAX_BRANCH_INDEX_ELEMENTS` elements
      of them are left out per program; past that, every one counts.
    A float residual, and anything computed from the data that the backward pass reads as a
    number (a bitcast or quantized activation, a mask, an `argmax`), is never left out. Where
    `depends` or `selectors` is shorter than `facts` (not read), nothing is left out.
    """
    reasons: list[str | None] = [None] * len(facts)
    branch: list[int] = []
    for i, fact in enumerate(facts):
        if np.dtype(fact.dtype).kind not in "iub":
            continue
        if i < len(depends) and not depends[i] and math.prod(fact.shape) <= BOOKKEEPING_ELEMENTS:
            reasons[i] = LOOP_BOOKKEEPING
        elif i < len(selectors) and selectors[i]:
            branch.append(i)
    if sum(math.prod(facts[i].shape) for i in branch) <= MAX_BRANCH_INDEX_ELEMENTS:
        for i in branch:
            reasons[i] = BRANCH_BOOKKEEPING
    return reasons


def is_bookkeeping(fact: ResidualFact) -> bool:
    """Whether a residual is loop or branch bookkeeping, not part of a policy: it carries a reason
    (`ResidualFact.left_out`, set by `bookkeeping_reasons` when the artifacts were read). Left out
    of every comparison of residuals and every budget, on both sides."""
    return fact.left_out is not None


@dataclass(frozen=True)
class RecomputeFigures:
    """The forward work one backward program does again (`graders.untrusted.signature`).

    Attributes:
        flops, flops_low: FLOPs of its ops that depend on no cotangent and repeat an operation
            of the forward program (`ModuleInfo.recompute_flops`; low: the cheapest branch where
            only the run picks one).
        named: the costliest recomputed operations' labels by op signature (at most 8), residuals
            named (`dot_general(saved f32[8,64] (tanh), saved f32[64,64] (argument w1)) -> f32[8,64]`).
        by_signature: the FLOPs of every recomputed operation by op signature, to compare with
            the reference's.
    """

    flops: int = 0
    flops_low: int = 0
    named: dict[str, str] = field(default_factory=dict)
    by_signature: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def of(info: ModuleInfo, residuals: list[ResidualFact]) -> RecomputeFigures:
        """The figures of a backward program's `ModuleInfo`, inspected with its forward program's
        signatures; `residuals` name its residual arguments in order."""
        names = [residual_name(r) for r in residuals]

        def name(m: re.Match[str]) -> str:
            k = int(m.group(1))
            return names[k] if k < len(names) else f"residual {k}"

        return RecomputeFigures(
            flops=info.recompute_flops,
            flops_low=info.recompute_flops_low,
            named={k: _PLACEHOLDER.sub(name, label) for k, label in info.recomputed.items()},
            by_signature=dict(info.recomputed_signatures),
        )


def device_bytes(residuals: list[ResidualFact]) -> int:
    """Residual bytes kept in device memory between the passes: on a mesh, by each device (what
    one device keeps, `ResidualFact.device_bytes`), else in all."""
    return sum(r.nbytes if r.device_bytes is None else r.device_bytes for r in residuals if r.on_device)


def host_bytes(residuals: list[ResidualFact]) -> int:
    """Residual bytes a policy offloads to host memory, counted as `device_bytes` counts the rest
    (on a mesh, what one device's share of the host keeps)."""
    return sum(r.nbytes if r.device_bytes is None else r.device_bytes for r in residuals if not r.on_device)


@dataclass
class CaseRun:
    """The submission's artifacts run on one case's hidden inputs.

    Attributes:
        expected: the reference's expectation for the case.
        outputs: per hidden input k, the primal output leaves of the submission's fwd.
        gradients: per k, the gradient leaves its bwd returned for the k-th cotangent.
        fd: per k, (central-difference estimate, analytic value, rounding noise of the estimate) of
            the directional derivative (`graders.verifier.fd.fd_opinion`).
        residuals: the residual facts read from the fwd artifact (provenance, notes where they agree).
        residual_values: per k, the values its fwd returned for each residual.
        fwd_peak_bytes, bwd_peak_bytes: peak live bytes of its artifacts.
        bwd_flops: FLOPs of one run of its backward program (None when unknown);
            bwd_flops_exact: False when a loop's trip count could not be read.
        bwd_residual_flops: of those, the FLOPs that depend on no cotangent: forward work redone
            and derivative factors computed from the residuals (`ModuleInfo.residual_flops`).
        bwd_flops_low, bwd_residual_flops_low: both with the cheapest branch where a branch index
            is known only at run time (`ModuleInfo.flops_low`).
        bwd_recompute: the forward work its backward program does again (None when unknown).
        fwd_flops_low: FLOPs of one run of its forward program, with the cheapest branch where only
            the run picks one (None when unknown).
        bwd_communication: on a mesh, what its compiled backward program communicates
            (`graders.verifier.collectives.Communication`); None on one device.
        xla_memory: on a mesh, XLA's per-device figures of its compiled programs
            (`graders.verifier.evaluate.CaseValues.xla_memory`); empty on one device.
        expected_matched: per reference residual, whether the submission saves it as a value
            (filled in by the residuals check).
    """

    expected: CaseExpectation
    outputs: list[list[np.ndarray]] = field(default_factory=list)
    gradients: list[list[np.ndarray]] = field(default_factory=list)
    residual_values: list[list[np.ndarray]] = field(default_factory=list)
    fd: list[tuple[float, float, float]] = field(default_factory=list)
    residuals: list[ResidualFact] = field(default_factory=list)
    fwd_peak_bytes: int = 0
    bwd_peak_bytes: int = 0
    bwd_flops: int | None = None
    bwd_flops_exact: bool = True
    bwd_residual_flops: int | None = None
    bwd_flops_low: int | None = None
    bwd_residual_flops_low: int | None = None
    bwd_recompute: RecomputeFigures | None = None
    fwd_flops_low: int | None = None
    bwd_communication: Any = None
    xla_memory: dict[str, Any] = field(default_factory=dict)
    expected_matched: list[bool] | None = None

    @property
    def label(self) -> str:
        """`case 'small' (d=4, N=8)` for messages."""
        parts = [f"{k}={v}" for k, v in self.expected.dims.items()]
        parts += [f"{k}={v!r}" for k, v in self.expected.static.items()]
        return f"case {self.expected.name!r}" + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True)
class Comparison:
    """How far one array is from its expected value.

    Attributes:
        ratio: max over elements of |got - expected| / allowed (<= 1 passes; inf on NaN mismatch).
        max_abs_diff: the largest |got - expected|.
        max_abs_expected: the largest |expected| (for a relative figure in messages).
        all_zero: every element of `got` is 0 while `expected` is not all 0.
    """

    ratio: float
    max_abs_diff: float
    max_abs_expected: float
    all_zero: bool

    @property
    def passed(self) -> bool:
        return self.ratio <= 1.0


def _all_finite(a: np.ndarray) -> bool:
    """Whether every element of a float64 array is finite, from one sum: NaN and infinities make
    the sum non-finite (an overflowing sum of finite values only sends the caller the slow way)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.sum(a)))


def compare_arrays(got: np.ndarray, expected: np.ndarray, tol: Tolerance) -> Comparison:
    """Elementwise: |got - expected| <= atol * max(1, max|expected|) + rtol * |expected|.

    NaN matches NaN only; an infinity matches the same infinity only. Shapes must be equal
    (callers check avals first). Computed in float64. When every element of both is finite and
    atol > 0 (the usual case) a shorter computation gives the same bits as the general one.
    """
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return Comparison(float("inf"), float("inf"), 0.0, False)
    all_zero = bool(g.size and not np.any(got) and np.any(expected))  # (the same on the unconverted arrays)
    if tol.atol > 0 and _all_finite(g) and _all_finite(e):
        if not g.size:
            return Comparison(0.0, 0.0, 0.0, all_zero)
        g, e = g.reshape(-1), e.reshape(-1)  # (1-d: ufuncs write into arrays, never 0-d scalars)
        abs_e = np.abs(e)
        max_abs_expected = float(np.max(abs_e))
        # allowed >= atol > 0 everywhere: no zero division, and diff == 0 gives a ratio of +0.0
        allowed = np.multiply(abs_e, tol.rtol, out=abs_e)
        allowed = np.add(tol.atol * max(1.0, max_abs_expected), allowed, out=allowed)
        with np.errstate(over="ignore"):
            diff = np.subtract(g, e)
        diff = np.abs(diff, out=diff)
        max_abs_diff = float(np.max(diff))
        ratios = np.divide(diff, allowed, out=allowed)
        return Comparison(float(np.max(ratios)), max_abs_diff, max_abs_expected, all_zero)
    return _compare_general(g, e, tol, all_zero)


def _compare_general(g: np.ndarray, e: np.ndarray, tol: Tolerance, all_zero: bool) -> Comparison:
    """`compare_arrays` on float64 arrays of one shape, NaN, infinities and atol = 0 included."""
    finite_e = e[np.isfinite(e)]
    max_abs_expected = float(np.max(np.abs(finite_e))) if finite_e.size else 0.0
    allowed = tol.atol * max(1.0, max_abs_expected) + tol.rtol * np.abs(np.where(np.isfinite(e), e, 0.0))
    same_special = (np.isnan(g) & np.isnan(e)) | (np.isinf(g) & (g == e))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same_special, 0.0, np.abs(g - e))
    diff = np.where(np.isnan(diff), np.inf, diff)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(diff == 0, 0.0, diff / np.where(allowed > 0, allowed, np.nan))
    ratios = np.where(np.isnan(ratios), np.inf, ratios)
    return Comparison(
        float(np.max(ratios)) if ratios.size else 0.0,
        float(np.max(diff)) if diff.size else 0.0,
        max_abs_expected,
        all_zero,
    )


CALIBRATION_FACTOR = 8.0  # a submission may be this many times as far from the truth as the reference


def compare_calibrated(
    got: np.ndarray,
    reference: np.ndarray,
    reference_error: float | None,
    tol: Tolerance,
    *,
    factor: float = CALIBRATION_FACTOR,
) -> Comparison:
    """`got` against the float32 reference, with a tolerance calibrated on the reference's own error.

    `reference_error` is max|reference - truth| for the reference evaluated in float64 on the same
    input. A submission passes when it is within `factor` times that of the truth, so elementwise
    |got - reference| may reach (factor + 1) * reference_error (the triangle inequality), or the
    problem's fixed tolerance (`compare_arrays`' formula; the floor that covers exact zeros),
    whichever is larger. Correct code that sums in another order lands within a few times the
    reference's rounding error; a wrong formula is off by orders of magnitude more (docs/ARCHITECTURE.md,
    "Tolerances"). Without a reference error (no float64 evaluation), the fixed tolerance alone.
    """
    if not reference_error:
        return compare_arrays(got, reference, tol)
    r = np.asarray(reference, dtype=np.float64)
    if r.size and _all_finite(r):
        scale = max(1.0, float(np.max(np.abs(r))))
    else:
        finite = r[np.isfinite(r)]
        scale = max(1.0, float(np.max(np.abs(finite)))) if finite.size else 1.0
    widened = Tolerance(rtol=tol.rtol, atol=max(tol.atol, (factor + 1.0) * reference_error / scale))
    return compare_arrays(got, reference, widened)


def human_bytes(n: int | float) -> str:
    """`3.5 MiB`, `812 B`: binary units, as memory is counted (the panel's and the checks' own)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
