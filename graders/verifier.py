"""The verifier: judges a bundle's exported artifacts against the reference, never running submission Python.

Steps (DESIGN.md): 1. module checks before anything runs (op allowlist, sizes, platform, effects);
2. aval checks against the case and the reference; 3. the residual signature read from the fwd
artifact; 4. values and gradients on the hidden inputs with random cotangents; 5. a
finite-difference second opinion; 6. peak live bytes of both artifacts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable


from graders.artifacts import (ArtifactError, Aval, ReadLimits, deserialize, exported_avals, flat_call,
                               inspect_module)
from graders.checks.common import CaseRun
from graders.checks.gradients import check_finite_difference, check_gradients
from graders.checks.residuals import check_peak_memory, check_residuals, describe_residuals, signature
from graders.checks.values import check_values
from graders.evaluate import evaluate_vjp
from graders.expectation import CaseExpectation, Expectations, named_sources
from graders.problem import Problem
from graders.verdict import CheckResult, ResidualFact, ResidualReport, Verdict, first_verdict
from sandbox.bundle import Bundle, BundleCase

MIB = 1024 * 1024
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VerifyLimits:
    """Caps on untrusted artifacts, checked before they run.

    Attributes:
        max_artifact_bytes: serialized size of one artifact.
        max_ops: operations in one module (all functions and regions).
        max_peak_live_bytes: the static peak live bytes of one artifact; above it the verdict is
            MEMORY_LIMIT_EXCEEDED without running it.
        max_depth: nesting of regions in one module; max_call_depth: longest chain of calls.
    """

    max_artifact_bytes: int = 8 * MIB
    max_ops: int = 50_000
    max_peak_live_bytes: int = 1024 * MIB
    max_depth: int = 64
    max_call_depth: int = 64

    @property
    def read_limits(self) -> ReadLimits:
        return ReadLimits(max_ops=self.max_ops, max_depth=self.max_depth, max_call_depth=self.max_call_depth)


@dataclass
class VerifyResult:
    """Checks, the residual report, the verdict and the score of one bundle."""

    checks: list[CheckResult]
    residuals: ResidualReport | None
    verdict: Verdict
    score: float
    details: dict[str, Any] = field(default_factory=dict)


class VersionMismatch(Exception):
    """The expectations are not of the problem version being judged: a fault of the judge."""


class _ArtifactRunError(Exception):
    """An exception raised while the submission's exported program was lowered, compiled or run."""


def _guarded(call: Callable[..., Any]) -> Callable[..., Any]:
    """`call` (an untrusted artifact) with whatever it raises turned into _ArtifactRunError, so the
    verdict blames the program for its own failures and only for those."""

    def run(*args: Any) -> Any:
        try:
            return call(*args)
        except MemoryError:
            raise
        except Exception as exc:
            raise _ArtifactRunError(f"{type(exc).__name__}: {str(exc)[:300]}") from None

    return run


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
    residuals: list[ResidualFact]


def _load_case(expected: CaseExpectation, case: BundleCase, problem: Problem, limits: VerifyLimits,
               leaf_names: list[str]) -> _Loaded:
    """Steps 1 to 3 for one case: nothing here runs the artifacts."""
    label = f"case {expected.name!r}"
    for kind, blob in (("forward", case.fwd), ("backward", case.bwd)):
        if len(blob) > limits.max_artifact_bytes:
            raise _fail("module", Verdict.RUNTIME_ERROR,
                        f"{label}: the exported {kind} program is {len(blob):,} bytes, more than the "
                        f"{limits.max_artifact_bytes:,} allowed. Large constants captured by the function "
                        f"(arrays built at trace time) end up inside the program.")
    try:
        fwd, bwd = deserialize(case.fwd), deserialize(case.bwd)
    except ArtifactError as exc:
        raise _fail("module", Verdict.RUNTIME_ERROR, f"{label}: the result is not a valid exported program ({exc})")
    allowed = frozenset(problem.spec.verify.allowed_custom_calls)
    infos = []
    for kind, exp in (("forward", fwd), ("backward", bwd)):
        if tuple(exp.platforms) != ("cpu",) or exp.nr_devices != 1:
            raise _fail("module", Verdict.RUNTIME_ERROR,
                        f"{label}: the {kind} program targets {exp.platforms} on {exp.nr_devices} devices, "
                        f"not one CPU")
        if exp.ordered_effects or exp.unordered_effects or exp.disabled_safety_checks:
            raise _fail("module", Verdict.RUNTIME_ERROR,
                        f"{label}: the {kind} program has side effects (callbacks, I/O) or disabled safety "
                        f"checks; only pure array computation can be judged")
        try:
            info = inspect_module(exp, allowed_custom_calls=allowed, limits=limits.read_limits)
        except ArtifactError as exc:
            raise _fail("module", Verdict.RUNTIME_ERROR, f"{label}: the {kind} program cannot be read ({exc})")
        except (MemoryError, RecursionError):
            raise
        except Exception:  # the MLIR bindings refusing a forged module in a way we did not foresee
            log.exception("reading a %s artifact failed", kind)
            raise _fail("module", Verdict.RUNTIME_ERROR, f"{label}: the {kind} program cannot be read")
        if info.disallowed:
            raise _fail("module", Verdict.RUNTIME_ERROR,
                        f"{label}: the {kind} program uses operations the judge does not run: "
                        f"{', '.join(info.disallowed)}. Host callbacks (jax.pure_callback, jax.debug.print, "
                        f"io_callback) and library calls outside pure array math are not allowed.",
                        disallowed=info.disallowed)
        if info.peak_live_bytes > limits.max_peak_live_bytes:
            raise _fail("module", Verdict.MEMORY_LIMIT_EXCEEDED,
                        f"{label}: the {kind} program would hold {info.peak_live_bytes:,} bytes live at once, "
                        f"more than the {limits.max_peak_live_bytes:,} allowed")
        infos.append(info)

    n_out = len(expected.output_avals)
    try:
        fwd_in, fwd_out = exported_avals(fwd.in_avals), exported_avals(fwd.out_avals)
        bwd_in, bwd_out = exported_avals(bwd.in_avals), exported_avals(bwd.out_avals)
    except ArtifactError as exc:
        raise _fail("avals", Verdict.RUNTIME_ERROR, f"{label}: {exc}")
    if fwd_in != expected.input_avals:
        raise _fail("avals", Verdict.RUNTIME_ERROR,
                    f"{label}: the exported program takes {_avals_text(fwd_in)}, but the case passes "
                    f"{_avals_text(expected.input_avals)}; the result was not produced by the runner")
    if case.n_primal_outputs != n_out or fwd_out[:n_out] != expected.output_avals:
        got = fwd_out[: case.n_primal_outputs] if case.n_primal_outputs <= len(fwd_out) else fwd_out
        raise _fail("avals", Verdict.WRONG_ANSWER,
                    f"{label}: your function returns {_avals_text(got)} but {_avals_text(expected.output_avals)} "
                    f"is expected (shape and dtype).")
    residual_avals = fwd_out[n_out:]
    if bwd_in != residual_avals + expected.output_avals:
        raise _fail("avals", Verdict.RUNTIME_ERROR,
                    f"{label}: the backward program does not take exactly the saved residuals and a cotangent")
    if bwd_out != expected.input_avals:
        raise _fail("avals", Verdict.WRONG_GRADIENT,
                    f"{label}: the backward program returns gradients {_avals_text(bwd_out)}"
                    f", expected {_avals_text(expected.input_avals)}")
    residuals = describe_residuals(residual_avals, case.residual_notes,
                                   sources=named_sources(infos[0].sources[n_out:], leaf_names))
    return _Loaded(expected, case, fwd, bwd, infos[0].peak_live_bytes, infos[1].peak_live_bytes, infos[1].flops,
                   residuals)


def _execute(loaded: _Loaded) -> CaseRun:
    """Steps 4 and 5: run fwd then bwd on every hidden input of the case.

    Raises:
        _Stop: the submission's artifact raised while it was lowered, compiled or run
            (RUNTIME_ERROR). Exceptions of our own code propagate: they are judge faults.
    """
    try:
        return _run_case(loaded)
    except _ArtifactRunError as exc:
        raise _fail("execute", Verdict.RUNTIME_ERROR,
                    f"case {loaded.expected.name!r}: your exported program failed to run: {exc}") from None


def _run_case(loaded: _Loaded) -> CaseRun:
    exp = loaded.expected
    n_out = len(exp.output_avals)
    fwd_call, bwd_call = _guarded(flat_call(loaded.fwd)), _guarded(flat_call(loaded.bwd))
    run = CaseRun(expected=exp, residuals=loaded.residuals, fwd_peak_bytes=loaded.fwd_peak,
                  bwd_peak_bytes=loaded.bwd_peak, bwd_flops=loaded.bwd_flops)
    for k, xs in enumerate(exp.inputs):
        outputs, residuals, gradients, fd = evaluate_vjp(fwd_call, bwd_call, xs, exp.cotangents[k],
                                                         exp.fd_directions[k], n_out=n_out, step=exp.fd_step)
        run.outputs.append(outputs)
        run.residual_values.append(residuals)
        run.gradients.append(gradients)
        run.fd.append(fd)
    return run


def residual_report(runs: list[CaseRun]) -> ResidualReport | None:
    """The report shown beside the verdict: the case whose residuals differ from the reference's
    with the most bytes at stake (so the numbers show what the mistake costs), else the case with
    the most residual bytes."""
    if not runs:
        return None

    def differs(run: CaseRun) -> bool:
        return signature(run.residuals) != signature(run.expected.residuals) or any(
            f.matched is False for f in run.residuals)

    differing = [r for r in runs if differs(r)]
    chosen = max(differing or runs, key=lambda r: max(r.expected.residual_bytes, sum(x.nbytes for x in r.residuals)))
    exp = chosen.expected
    expected = [fact.model_copy() for fact in exp.residuals]
    if chosen.expected_matched is not None:
        for fact, saved in zip(expected, chosen.expected_matched):
            fact.matched = saved
    return ResidualReport(
        case=exp.name, expected=expected, submitted=chosen.residuals,
        expected_bytes=exp.residual_bytes, submitted_bytes=sum(r.nbytes for r in chosen.residuals),
        expected_bwd_peak_bytes=exp.bwd_peak_bytes, submitted_bwd_peak_bytes=chosen.bwd_peak_bytes,
        expected_fwd_peak_bytes=exp.fwd_peak_bytes, submitted_fwd_peak_bytes=chosen.fwd_peak_bytes,
        no_checkpoint_bytes=exp.plain_residual_bytes, no_checkpoint_bwd_peak_bytes=exp.plain_bwd_peak_bytes,
        expected_bwd_flops=exp.bwd_flops, submitted_bwd_flops=chosen.bwd_flops,
        no_checkpoint_bwd_flops=exp.plain_bwd_flops,
        expected_recompute_flops=exp.recompute_flops(exp.bwd_flops),
        submitted_recompute_flops=exp.recompute_flops(chosen.bwd_flops),
        full_remat_bytes=exp.full_remat_bytes, full_remat_bwd_flops=exp.full_remat_bwd_flops,
        full_remat_recompute_flops=exp.recompute_flops(exp.full_remat_bwd_flops),
        full_remat_bwd_peak_bytes=exp.full_remat_bwd_peak_bytes,
    )


def score_of(checks: list[CheckResult], problem: Problem) -> float:
    """value weight if values pass; + gradient weight if gradients also pass; + policy weight if
    the memory checks also pass (a policy is only worth something when gradients are right)."""
    passed = {c.name: c.passed for c in checks}
    w = problem.spec.scoring
    value_ok = passed.get("value", False)
    gradient_ok = value_ok and passed.get("gradient", False) and passed.get("finite_difference", False)
    policy_ok = gradient_ok and passed.get("residuals", False) and passed.get("peak_memory", False)
    return round(w.value * value_ok + w.gradient * gradient_ok + w.policy * policy_ok, 4)


def verify(bundle: Bundle, problem: Problem, expectations: Expectations, *, limits: VerifyLimits,
           on_execute: Callable[[], None] = lambda: None) -> VerifyResult:
    """Judges an "ok" bundle.

    Args:
        bundle: the parsed bundle (status "ok").
        problem: the problem it is judged against.
        expectations: the reference's expectations for the same problem version.
        limits: caps on the artifacts.
        on_execute: called once, just before the first untrusted artifact runs (the process
            running us reports it so a time-out after it is the submission's, not ours).

    Returns:
        VerifyResult with every check that could be made.

    Raises:
        VersionMismatch: `expectations` belong to another problem version (a judge fault).
        Any exception of our own code (a judge fault); what the artifacts do is a verdict.
    """
    if expectations.version != problem.version or expectations.slug != problem.slug:
        raise VersionMismatch(f"expectations of {expectations.slug} {expectations.version} cannot judge "
                              f"{problem.slug} {problem.version}")
    checks: list[CheckResult] = []
    expected_names = [c.name for c in expectations.cases]
    got_names = [c.name for c in bundle.cases]
    try:
        if got_names != expected_names:
            raise _fail("module", Verdict.RUNTIME_ERROR,
                        f"the result has cases {got_names}, expected {expected_names}")
        loaded = [_load_case(e, c, problem, limits, expectations.leaf_names)
                  for e, c in zip(expectations.cases, bundle.cases)]
    except _Stop as stop:
        checks.append(stop.check)
        return VerifyResult(checks, None, first_verdict([stop.check.verdict or Verdict.RUNTIME_ERROR]), 0.0)
    checks.append(CheckResult(name="module", passed=True,
                              message=f"{2 * len(loaded)} exported programs use only allowed operations"))
    checks.append(CheckResult(name="avals", passed=True,
                              message="inputs, outputs and gradients have the expected shapes and dtypes"))
    on_execute()
    try:
        runs = [_execute(item) for item in loaded]
    except _Stop as stop:
        checks.append(stop.check)
        return VerifyResult(checks, None, stop.check.verdict or Verdict.RUNTIME_ERROR, 0.0)
    checks += [
        check_values(runs, spec=problem.spec),
        check_gradients(runs, spec=problem.spec, leaf_names=expectations.leaf_names),
        check_finite_difference(runs),
        check_residuals(runs, spec=problem.spec),
        check_peak_memory(runs, rule=problem.spec.memory),
    ]
    verdict = first_verdict([c.verdict for c in checks if not c.passed and c.verdict is not None])
    return VerifyResult(checks, residual_report(runs), verdict, score_of(checks, problem))
