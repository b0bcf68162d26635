"""The verifier: judges a bundle's exported artifacts against the reference, never running submission Python.

Steps (docs/ARCHITECTURE.md): 1. module checks before anything runs (op allowlist, sizes,
platform, effects); 2. aval checks against the case and the reference; 3. the residual signature
read from the fwd artifact; 4. values and gradients on the hidden inputs with random cotangents,
against the reference's (whose own gradients were checked against finite differences in float64
once per version, `graders.reference.build`); 5. the checks of `graders.checks.registry.CHECKS` on
the runs (values, gradients, residuals, peak live bytes, recompute), which also make the score.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graders.artifact_limits import Aval, VerifyLimits, is_differentiable
from graders.checks.check import CheckContext
from graders.checks.comparison import CaseRun, RecomputeFigures
from graders.checks.described import describe_residuals
from graders.checks.registry import run_checks, score_of
from graders.checks.residuals import with_layouts
from graders.problems.problem import Problem
from graders.reference.expectation import CaseExpectation, Expectations, named_sources
from graders.untrusted.parse import deserialize, exported_avals, shared_ir_context
from graders.untrusted.reader import inspect_module
from graders.untrusted.result import ArtifactError, ModuleInfo
from graders.verdict import CheckResult, ResidualFact, ResidualReport, Verdict, first_verdict
from graders.verifier.digests import program_digest, submission_digest
from graders.verifier.evaluate import ArtifactRunError, CaseData, evaluate_cases
from graders.verifier.report import residual_report
from sandbox.bundle import Bundle, BundleCase

log = logging.getLogger(__name__)


@dataclass
class VerifyResult:
    """Checks, the residual report, the verdict and the score of one bundle."""

    checks: list[CheckResult]
    residuals: ResidualReport | None
    verdict: Verdict
    score: float
    details: dict[str, Any] = field(default_factory=dict)
    program_digest: str | None = None  # `program_digest` of the bundle, once its artifacts are read


class VersionMismatch(Exception):
    """The expectations are not of the problem version being judged: a fault of the judge."""


class _Stop(Exception):
    """Ends verification early with one failed check."""

    def __init__(self, check: CheckResult):
        super().__init__(check.message)
        self.check = check


def _fail(name: str, verdict: Verdict, message: str, **details: Any) -> _Stop:
    return _Stop(CheckResult(name=name, passed=False, message=message, details=details, verdict=verdict))


def _avals_text(avals: list[Aval]) -> str:
    return "(" + ", ".join(str(a) for a in avals) + ")"


@dataclass
class _Loaded:
    expected: CaseExpectation
    case: BundleCase
    fwd: Any
    bwd: Any
    fwd_peak: int
    bwd_peak: int
    bwd_flops: int
    bwd_flops_exact: bool
    bwd_residual_flops: int
    bwd_flops_low: int
    bwd_residual_flops_low: int
    residuals: list[ResidualFact]
    fwd_digest: str
    bwd_digest: str
    fwd_program: str = ""
    bwd_program: str = ""
    bwd_info: ModuleInfo | None = None
    fwd_flops_low: int | None = None


def _check_sizes(label: str, case: BundleCase, limits: VerifyLimits) -> None:
    """Raises _Stop (RUNTIME_ERROR) if either serialized artifact is over the size limit."""
    for kind, blob in (("forward", case.fwd), ("backward", case.bwd)):
        if len(blob) > limits.max_artifact_bytes:
            raise _fail(
                "module",
                Verdict.RUNTIME_ERROR,
                f"{label}: the exported {kind} program is {len(blob):,} bytes, more than the "
                f"{limits.max_artifact_bytes:,} allowed. Large constants captured by the function "
                f"(arrays built at trace time) end up inside the program.",
            )


def _deserialize_pair(label: str, case: BundleCase) -> tuple[Any, Any]:
    """Returns the case's (fwd, bwd) Exported objects; raises _Stop (RUNTIME_ERROR) if either is invalid."""
    try:
        return deserialize(case.fwd), deserialize(case.bwd)
    except ArtifactError as exc:
        raise _fail(
            "module", Verdict.RUNTIME_ERROR, f"{label}: the result is not a valid exported program ({exc})"
        ) from exc


def _inspect_program(
    label: str,
    kind: str,
    exp: Any,
    allowed: frozenset[str],
    limits: VerifyLimits,
    cotangents: int = 0,
    forward: frozenset[str] | None = None,
    mesh_axes: dict[str, int] | None = None,
) -> ModuleInfo:
    """Returns the ModuleInfo of one program; raises _Stop if its platform, device count, effects,
    ops or peak are refused (a program on a mesh runs on exactly the mesh's devices)."""
    devices = 1 if mesh_axes is None else math.prod(mesh_axes.values())
    if tuple(exp.platforms) != ("cpu",) or exp.nr_devices != devices:
        where = "one CPU" if devices == 1 else f"the problem's mesh of {devices} CPU devices"
        raise _fail(
            "module",
            Verdict.RUNTIME_ERROR,
            f"{label}: the {kind} program targets {exp.platforms} on {exp.nr_devices} devices, not {where}",
        )
    if exp.ordered_effects or exp.unordered_effects or exp.disabled_safety_checks:
        raise _fail(
            "module",
            Verdict.RUNTIME_ERROR,
            f"{label}: the {kind} program has side effects (callbacks, I/O) or disabled safety "
            f"checks; only pure array computation can be judged",
        )
    try:
        info = inspect_module(
            exp,
            allowed_custom_calls=allowed,
            limits=limits.read_limits,
            cotangents=cotangents,
            forward_ops=forward,
            mesh_axes=mesh_axes,
        )
    except ArtifactError as exc:
        raise _fail("module", Verdict.RUNTIME_ERROR, f"{label}: the {kind} program cannot be read ({exc})") from exc
    except (MemoryError, RecursionError):
        raise
    except Exception:  # the MLIR bindings refusing a forged module in a way we did not foresee
        log.exception("reading a %s artifact failed", kind)
        raise _fail("module", Verdict.RUNTIME_ERROR, f"{label}: the {kind} program cannot be read") from None
    if info.disallowed:
        raise _fail(
            "module",
            Verdict.RUNTIME_ERROR,
            f"{label}: the {kind} program uses operations the judge does not run: "
            f"{', '.join(info.disallowed)}. Host callbacks (jax.pure_callback, jax.debug.print, "
            f"io_callback) and library calls outside pure array math are not allowed.",
            disallowed=info.disallowed,
        )
    if info.peak_live_bytes > limits.max_peak_live_bytes:
        raise _fail(
            "module",
            Verdict.MEMORY_LIMIT_EXCEEDED,
            f"{label}: the {kind} program would hold {info.peak_live_bytes:,} bytes live at once, "
            f"more than the {limits.max_peak_live_bytes:,} allowed",
        )
    return info


def _check_avals(label: str, expected: CaseExpectation, case: BundleCase, fwd: Any, bwd: Any) -> list[Aval]:
    """Returns the residual avals (fwd outputs past the primal ones); raises _Stop if any aval disagrees."""
    n_out = len(expected.output_avals)
    try:
        fwd_in, fwd_out = exported_avals(fwd.in_avals), exported_avals(fwd.out_avals)
        bwd_in, bwd_out = exported_avals(bwd.in_avals), exported_avals(bwd.out_avals)
    except ArtifactError as exc:
        raise _fail("avals", Verdict.RUNTIME_ERROR, f"{label}: {exc}") from exc
    if fwd_in != expected.input_avals:
        raise _fail(
            "avals",
            Verdict.RUNTIME_ERROR,
            f"{label}: the exported program takes {_avals_text(fwd_in)}, but the case passes "
            f"{_avals_text(expected.input_avals)}; the result was not produced by the runner",
        )
    if case.n_primal_outputs != n_out or fwd_out[:n_out] != expected.output_avals:
        got = fwd_out[: case.n_primal_outputs] if case.n_primal_outputs <= len(fwd_out) else fwd_out
        raise _fail(
            "avals",
            Verdict.WRONG_ANSWER,
            f"{label}: your function returns {_avals_text(got)} but {_avals_text(expected.output_avals)} "
            f"is expected (shape and dtype).",
        )
    residual_avals = fwd_out[n_out:]
    if bwd_in != residual_avals + expected.output_avals:
        raise _fail(
            "avals",
            Verdict.RUNTIME_ERROR,
            f"{label}: the backward program does not take exactly the saved residuals and a cotangent",
        )
    differentiable = [a for a in expected.input_avals if is_differentiable(a.dtype)]
    if bwd_out != differentiable:
        raise _fail(
            "avals",
            Verdict.WRONG_GRADIENT,
            f"{label}: the backward program returns gradients {_avals_text(bwd_out)}"
            f", expected {_avals_text(differentiable)}",
        )
    return residual_avals


def _load_case(
    expected: CaseExpectation, case: BundleCase, problem: Problem, limits: VerifyLimits, leaf_names: list[str]
) -> _Loaded:
    """Steps 1 to 3 for one case: nothing here runs the artifacts."""
    label = f"case {expected.name!r}"
    _check_sizes(label, case, limits)
    fwd, bwd = _deserialize_pair(label, case)
    allowed = frozenset(problem.spec.verify.allowed_custom_calls)
    n_out = len(expected.output_avals)
    axes = problem.spec.mesh_axes
    forward = _inspect_program(label, "forward", fwd, allowed, limits, mesh_axes=axes)
    infos = [
        forward,
        _inspect_program(
            label, "backward", bwd, allowed, limits, cotangents=n_out, forward=forward.op_signatures, mesh_axes=axes
        ),
    ]
    residual_avals = _check_avals(label, expected, case, fwd, bwd)
    residuals = describe_residuals(
        residual_avals,
        case.residual_notes,
        sources=named_sources(infos[0].sources[n_out:], leaf_names),
        memory_kinds=infos[0].memory_kinds[n_out:],
        depends=infos[0].depends_on_arguments[n_out:],
        selectors=infos[1].selector_arguments[: len(residual_avals)],
    )
    return _Loaded(
        expected,
        case,
        fwd,
        bwd,
        infos[0].peak_live_bytes,
        infos[1].peak_live_bytes,
        infos[1].flops,
        infos[1].flops_exact,
        infos[1].residual_flops,
        infos[1].flops_low,
        infos[1].residual_flops_low,
        residuals,
        infos[0].digest,
        infos[1].digest,
        infos[0].program_digest,
        infos[1].program_digest,
        infos[1],
        infos[0].flops_low,
    )


def _execute(loaded: list[_Loaded], limits: VerifyLimits, problem: Problem, leaf_names: list[str]) -> list[CaseRun]:
    """Step 4: every case's fwd then bwd on every hidden input, in one compiled program per
    artifact kind (`evaluate_cases`, as the reference was evaluated).

    Raises:
        _Stop: the submission's artifact raised while it was traced, lowered, compiled or run
            (RUNTIME_ERROR, naming the first failing case). Exceptions of our own code propagate:
            they are judge faults.
    """
    data = [
        CaseData(
            fwd=item.fwd,
            bwd=item.bwd,
            n_out=len(item.expected.output_avals),
            inputs=item.expected.inputs,
            cotangents=item.expected.cotangents,
            directions=None,
            step=0.0,
            peak_bytes=max(item.fwd_peak, item.bwd_peak),
            mesh=problem.spec.mesh_plain,
            leaf_names=leaf_names,
        )
        for item in loaded
    ]
    try:
        # cases share programs while their static peaks add up to what one artifact may hold
        values = evaluate_cases(data, max_group_bytes=limits.max_peak_live_bytes)
    except ArtifactRunError as exc:
        raise _fail(
            "execute",
            Verdict.RUNTIME_ERROR,
            f"case {loaded[exc.case].expected.name!r}: your exported program failed to run: {exc}",
        ) from None
    return [
        CaseRun(
            expected=item.expected,
            residuals=with_layouts(item.residuals, v.residual_layouts),
            bwd_communication=v.bwd_communication,
            xla_memory=v.xla_memory,
            fwd_peak_bytes=item.fwd_peak,
            bwd_peak_bytes=item.bwd_peak,
            bwd_flops=item.bwd_flops,
            bwd_flops_exact=item.bwd_flops_exact,
            bwd_residual_flops=item.bwd_residual_flops,
            bwd_flops_low=item.bwd_flops_low,
            bwd_residual_flops_low=item.bwd_residual_flops_low,
            fwd_flops_low=item.fwd_flops_low,
            bwd_recompute=RecomputeFigures.of(item.bwd_info, item.residuals) if item.bwd_info else None,
            outputs=v.outputs,
            residual_values=v.residuals,
            gradients=v.gradients,
            fd=v.fd,
        )
        for item, v in zip(loaded, values, strict=True)
    ]


def _load_all(bundle: Bundle, problem: Problem, expectations: Expectations, limits: VerifyLimits) -> list[_Loaded]:
    """Steps 1 to 3 for every case, in one MLIR context; raises `_Stop` with the failed check."""
    expected_names = [c.name for c in expectations.cases]
    got_names = [c.name for c in bundle.cases]
    if got_names != expected_names:
        raise _fail("module", Verdict.RUNTIME_ERROR, f"the result has cases {got_names}, expected {expected_names}")
    with shared_ir_context():  # one MLIR context for all the artifacts read
        return [
            _load_case(e, c, problem, limits, expectations.leaf_names)
            for e, c in zip(expectations.cases, bundle.cases, strict=True)
        ]


def _static_checks(n_cases: int) -> list[CheckResult]:
    """The "module" and "avals" checks of `n_cases` cases whose artifacts all loaded (steps 1 to 3)."""
    return [
        CheckResult(name="module", passed=True, message=f"{2 * n_cases} exported programs use only allowed operations"),
        CheckResult(
            name="avals", passed=True, message="inputs, outputs and gradients have the expected shapes and dtypes"
        ),
    ]


def verify(
    bundle: Bundle,
    problem: Problem,
    expectations: Expectations,
    *,
    limits: VerifyLimits,
    on_digest: Callable[[str], None] = lambda d: None,
    on_execute: Callable[[], None] = lambda: None,
) -> VerifyResult:
    """Judges an "ok" bundle.

    Args:
        bundle: the parsed bundle (status "ok").
        problem: the problem it is judged against.
        expectations: the reference's expectations for the same problem version.
        limits: caps on the artifacts.
        on_digest: called once with the bundle's content key (`submission_digest`, 64 hex
            digits) when every case has been loaded and checked (steps 1 to 3), before
            `on_execute`; not called when verification stops before that. A caller holding a
            result for the same key (and problem version, seed, limits, JAX version) may use it.
        on_execute: called once, just before the first untrusted artifact runs (the process
            running us reports it so a time-out after it is the submission's, not ours).

    Returns:
        VerifyResult with every check that could be made.

    Raises:
        VersionMismatch: `expectations` belong to another problem version (a judge fault).
        Any exception of our own code (a judge fault); what the artifacts do is a verdict.
    """
    if expectations.version != problem.version or expectations.slug != problem.slug:
        raise VersionMismatch(
            f"expectations of {expectations.slug} {expectations.version} cannot judge {problem.slug} {problem.version}"
        )
    try:
        loaded = _load_all(bundle, problem, expectations, limits)
    except _Stop as stop:
        return VerifyResult([stop.check], None, first_verdict([stop.check.verdict or Verdict.RUNTIME_ERROR]), 0.0)
    on_digest(submission_digest([(item.case, item.fwd_digest, item.bwd_digest) for item in loaded]))
    programs = program_digest([(item.fwd_program, item.bwd_program) for item in loaded])
    checks = _static_checks(len(loaded))
    on_execute()
    try:
        runs = _execute(loaded, limits, problem, expectations.leaf_names)
    except _Stop as stop:
        checks.append(stop.check)
        return VerifyResult(checks, None, stop.check.verdict or Verdict.RUNTIME_ERROR, 0.0, program_digest=programs)
    checks += run_checks(runs, CheckContext(problem.spec, expectations.leaf_names))
    verdict = first_verdict([c.verdict for c in checks if not c.passed and c.verdict is not None])
    score = score_of(checks, problem.spec.scoring)
    return VerifyResult(checks, residual_report(runs), verdict, score, program_digest=programs)
