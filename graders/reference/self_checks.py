"""The reference's self-checks, run while its expectations are built (`graders.reference.build`): its
programs fit the verifier's memory cap (`memory_limit`), exporting every case fits the time a
submission gets for the same work (`time_limit`), it exports and runs (`runtime_error`), a second
export gives the same results (`deterministic`), and in float64 its gradients are the derivatives
of its own function along random directions (`finite_difference`). The float64 run also
calibrates tolerances: the float32 reference's own largest error per output, gradient and
residual (docs/ARCHITECTURE.md, "Tolerances").

Each check raises `graders.reference.failures.ReferenceCheckError` naming the check.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from graders.artifact_limits import VerifyLimits, is_differentiable
from graders.problems.hidden_inputs import case_arg_specs
from graders.problems.problem import Problem
from graders.reference.expectation import CaseExpectation
from graders.reference.failures import ReferenceCheckError
from graders.untrusted.parse import deserialize, exported_avals
from graders.untrusted.reader import inspect_module
from graders.untrusted.result import ModuleInfo
from graders.verifier.evaluate import ArtifactRunError, CaseData, evaluate_cases
from jailside.export import export_case

# the float64 finite-difference step (scaled by max(1, max|x|) per leaf): small, so few relu kinks
# fall inside it (at 1e-6, 8 layers of 131k relus gave 0.7% in scan_layers_remat)
FD_STEP = 1e-9
# relative disagreement allowed in float64 (measured on the bank's references: at most 1.3e-5,
# rounding; a stop_gradient or a wrong custom_vjp is off by percents or more)
FD_TOLERANCE = 1e-3


def _float64_specs(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def widen(spec: dict[str, Any]) -> dict[str, Any]:
        if spec["kind"] == "array":
            return {**spec, "dtype": "float64"} if is_differentiable(spec["dtype"]) else spec
        if spec["kind"] == "list":
            return {**spec, "items": [widen(i) for i in spec["items"]]}
        if spec["kind"] == "dict":
            return {**spec, "items": {k: widen(i) for k, i in spec["items"].items()}}
        return spec

    return [widen(s) for s in specs]


def _max_error(reference: np.ndarray, truth: np.ndarray) -> float:
    """max|reference - truth| over the finite elements, in float64 (0.0 when there are none)."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(np.asarray(reference, np.float64) - np.asarray(truth, np.float64))
    finite = diff[np.isfinite(diff)]
    return float(np.max(finite)) if finite.size else 0.0


def _float64_case(fwd: Any, bwd: Any, n_out: int, expectation: CaseExpectation, data: CaseData) -> CaseData:
    """The float64 programs of one case with its hidden inputs, cotangents and finite-difference
    directions upcast to float64, stepped by `FD_STEP`."""
    return CaseData(
        fwd=fwd,
        bwd=bwd,
        n_out=n_out,
        step=FD_STEP,
        directions=[[np.asarray(d, np.float64) for d in ds] for ds in expectation.fd_directions] or None,
        inputs=[[np.asarray(x, np.float64) for x in xs] for xs in expectation.inputs],
        cotangents=[[np.asarray(c, np.float64) for c in cts] for cts in expectation.cotangents],
        mesh=data.mesh,
        leaf_names=data.leaf_names,
    )


def _float64_truth(
    fn: Callable[..., Any], specs: list[dict[str, Any]], expectation: CaseExpectation, data: CaseData
) -> list[tuple[float, float, float]] | None:
    """Evaluates the reference in float64 on the case's hidden inputs and cotangents (upcast), and
    at inputs shifted by `FD_STEP` along the case's random directions.

    Stores the float32 reference's own largest error per output, gradient and (when the float64
    residuals line up with the float32 ones) residual: the scale tolerances are calibrated on
    (docs/ARCHITECTURE.md, "Tolerances"). Leaves them empty when the reference cannot run in
    float64: checks then use the problem's fixed tolerance.

    Returns:
        Per hidden input, (central difference, analytic directional derivative) in float64: the
        reference's finite-difference self-check; None when the reference cannot run in float64
        with every input and output in float64 (the check is then skipped).
    """
    # JAX only in the child that builds expectations: the server imports this package
    import jax

    n_out = data.n_out
    try:
        with jax.enable_x64(True):
            fwd_blob, bwd_blob, n64 = export_case(fn, _float64_specs(specs), data.mesh)
            fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
            out64 = exported_avals(fwd.out_avals)
            res64 = out64[n64:]
            same_residuals = [a.shape for a in res64] == [tuple(r.shape) for r in expectation.residuals]
            if n64 != n_out:
                return None
            all_f64 = all(a.dtype == "float64" for a in [*exported_avals(fwd.in_avals), *out64[:n_out]])
            (truth,) = evaluate_cases([_float64_case(fwd, bwd, n_out, expectation, data)])
        outputs = [
            [_max_error(r, t) for r, t in zip(expectation.outputs[k], outs, strict=True)]
            for k, outs in enumerate(truth.outputs)
        ]
        gradients = [
            [_max_error(r, t) for r, t in zip(expectation.gradients[k], grads, strict=True)]
            for k, grads in enumerate(truth.gradients)
        ]
        # float64 may save other residuals than float32 (another count): errors only where they line up
        residuals = [
            [_max_error(r, t) for r, t in zip(expectation.residual_values[k], res, strict=True)]
            for k, res in enumerate(truth.residuals)
            if same_residuals
        ]
    except Exception:  # noqa: BLE001 - the float64 evaluation is a calibration aid; the fixed tolerance stands in
        return None
    expectation.output_errors, expectation.gradient_errors = outputs, gradients
    if same_residuals:
        expectation.residual_errors = residuals
    return truth.fd if all_f64 else None


def fd_disagreement(fd: float, analytic: float, noise: float = 0.0) -> float:
    """How far a central difference and an analytic directional derivative disagree beyond the
    central difference's rounding `noise` (`graders.verifier.fd.fd_opinion`), relative to the larger of
    the two (0.0 when both are below 1e-12: no slope to speak of)."""
    scale = max(abs(fd), abs(analytic))
    if not math.isfinite(fd) or not math.isfinite(analytic):
        return math.inf
    return 0.0 if scale < 1e-12 else max(0.0, abs(fd - analytic) - max(0.0, noise)) / scale


def _check_finite_difference(case: str, fd: list[tuple[float, float, float]]) -> None:
    """Raises `ReferenceCheckError("finite_difference")` when, in float64, the reference's gradient
    along a random direction disagrees with its own function's rate of change there."""
    for k, (central, analytic, noise) in enumerate(fd):
        disagreement = fd_disagreement(central, analytic, noise)
        if disagreement > FD_TOLERANCE:
            raise ReferenceCheckError(
                "finite_difference",
                f"on case {case!r} (hidden input {k + 1} of {len(fd)}), in float64, the reference's gradient "
                f"says the function changes at rate {analytic:.6g} along a random direction, but the function "
                f"itself changes at rate {central:.6g} (relative difference {disagreement:.2%}, allowed "
                f"{FD_TOLERANCE:.1%}): its backward pass does not differentiate its forward pass. Look for a "
                f"stop_gradient, a custom_vjp whose backward rule is wrong, or a value computed outside JAX.",
            )


def _same_values(a: Any, b: Any) -> bool:
    """Bit-identical results of two evaluations (NaN equal to NaN): outputs, residuals, gradients."""
    for field_a, field_b in ((a.outputs, b.outputs), (a.residuals, b.residuals), (a.gradients, b.gradients)):
        for xs, ys in zip(field_a, field_b, strict=True):
            if len(xs) != len(ys) or not all(
                np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True) for x, y in zip(xs, ys, strict=True)
            ):
                return False
    return True


def _export(
    fn: Callable[..., Any], specs: list[dict[str, Any]], case: str, mesh: dict[str, Any] | None
) -> tuple[bytes, bytes, int]:
    """`export_case` of the reference on one case (on the problem's mesh, if it has one).

    Raises:
        ReferenceCheckError: runtime_error, with what the reference raised.
    """
    try:
        return export_case(fn, specs, mesh)
    except MemoryError:
        raise ReferenceCheckError(
            "memory_limit", f"exporting the reference on case {case!r} ran out of memory: make the case smaller"
        ) from None
    except Exception as exc:
        raise ReferenceCheckError(
            "runtime_error", f"exporting the reference on case {case!r} raised {type(exc).__name__}: {exc}"
        ) from exc


def export_within_budget(
    fn: Callable[..., Any],
    specs: list[dict[str, Any]],
    case: str,
    export_s: float,
    export_budget_s: float | None,
    mesh: dict[str, Any] | None = None,
) -> tuple[bytes, bytes, int, float]:
    """`_export` of one case and the export seconds so far including it.

    Raises:
        ReferenceCheckError: as `_export`, or time_limit when the seconds so far exceed the budget.
    """
    t0 = time.monotonic()
    fwd_blob, bwd_blob, n_out = _export(fn, specs, case, mesh)
    export_s += time.monotonic() - t0
    if export_budget_s is not None and export_s > export_budget_s:
        raise ReferenceCheckError(
            "time_limit",
            f"exporting the reference took {export_s:.1f} s by case {case!r}, more than "
            f"the {export_budget_s:g} s a submission gets for exporting every case in the jail "
            f"([limits] wall_time_limit_s): a submission as fast as the reference would be "
            f"judged TIME_LIMIT_EXCEEDED. Make the reference (or the cases) faster, or raise "
            f"wall_time_limit_s in problem.toml's [limits].",
        )
    return fwd_blob, bwd_blob, n_out, export_s


def check_peak_memory(case: str, fwd_info: ModuleInfo, bwd_info: ModuleInfo, limits: VerifyLimits) -> None:
    """Raises `ReferenceCheckError("memory_limit")` when either program holds more than the verifier allows."""
    for kind, info in (("forward", fwd_info), ("backward", bwd_info)):
        if info.peak_live_bytes > limits.max_peak_live_bytes:
            raise ReferenceCheckError(
                "memory_limit",
                f"on case {case!r} the reference's {kind} program holds "
                f"{info.peak_live_bytes:,} bytes live at once, more than the "
                f"{limits.max_peak_live_bytes:,} the verifier lets any exported program hold "
                f"(a submission like it is judged MEMORY_LIMIT_EXCEEDED): make the case smaller.",
            )


def finite_difference_pass(
    fn: Callable[..., Any], problem: Problem, cases: list[CaseExpectation], artifacts: list[CaseData]
) -> ReferenceCheckError | None:
    """Runs each case in float64 (`_float64_truth`), recording its finite-difference disagreement
    in its expectation. Returns the first case's finite-difference failure, or None."""
    first: ReferenceCheckError | None = None
    for case, expectation, data in zip(problem.spec.cases, cases, artifacts, strict=True):
        fd = _float64_truth(fn, case_arg_specs(problem.spec, case), expectation, data)
        if fd is not None:
            expectation.fd_reference_error = [fd_disagreement(c, a, n) for c, a, n in fd]
            if first is None:
                try:
                    _check_finite_difference(case.name, fd)
                except ReferenceCheckError as failure:
                    first = failure
    return first


def run_reference(artifacts: list[CaseData], cases: list[CaseExpectation], limits: VerifyLimits) -> list[Any]:
    """Runs the reference's programs as the verifier runs a submission's (the grouping of cases
    changes no value).

    Raises:
        ReferenceCheckError: runtime_error or memory_limit.
    """
    try:
        return evaluate_cases(artifacts, max_group_bytes=limits.max_peak_live_bytes)
    except ArtifactRunError as exc:
        raise ReferenceCheckError(
            "runtime_error", f"running the reference's exported programs on case {cases[exc.case].name!r} failed: {exc}"
        ) from exc
    except MemoryError:
        raise ReferenceCheckError(
            "memory_limit",
            "running the reference's exported programs ran out of the verifier's memory: make the cases smaller",
        ) from None


def check_deterministic(
    fn: Callable[..., Any],
    problem: Problem,
    cases: list[CaseExpectation],
    artifacts: list[CaseData],
    digests: list[tuple[str, str]],
    values: list[Any],
    limits: VerifyLimits,
) -> None:
    """Exports the reference a second time: the same programs (normalized digests), or programs
    whose results on every hidden input are bit-identical to the first's.

    Raises:
        ReferenceCheckError: deterministic, when the results differ (randomness or state that the
            reference reads while it is traced: an unseeded numpy or Python random, the clock, a
            global that changes between calls).
    """
    changed: list[int] = []  # indices of the cases whose second export differs
    again: list[CaseData] = []
    for i, (case, data, first) in enumerate(zip(problem.spec.cases, artifacts, digests, strict=True)):
        fwd_blob, bwd_blob, n_out = _export(fn, case_arg_specs(problem.spec, case), case.name, problem.spec.mesh_plain)
        fwd, bwd = deserialize(fwd_blob), deserialize(bwd_blob)
        axes = problem.spec.mesh_axes
        if (inspect_module(fwd, mesh_axes=axes).digest, inspect_module(bwd, mesh_axes=axes).digest) == first:
            continue
        changed.append(i)
        again.append(dataclasses.replace(data, fwd=fwd, bwd=bwd, n_out=n_out))  # same inputs and cotangents
    if not again:
        return
    for i, second in zip(changed, run_reference(again, [cases[j] for j in changed], limits), strict=True):
        if not _same_values(values[i], second):
            raise ReferenceCheckError(
                "deterministic",
                f"exported twice, the reference gives different results on case "
                f"{cases[i].name!r}: it reads randomness or changing state while it is traced (an "
                f"unseeded numpy or Python random, the clock, a global). Use jax.random with a "
                f"fixed key, or make the value an argument.",
            )
