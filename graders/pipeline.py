"""Grading one submission end to end: jail child, bundle, verifier child, verdict report.

The same function serves the server's workers and `remat-judge grade`. It never imports or runs
submission code, and never imports JAX: the submission runs in a jail child
(`sandbox/jail.py`), its artifacts in a verifier child (`graders/verifier/client.py`), both forked
from templates by `sandbox/supervise.py`. This module turns what they report into a verdict.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable

from graders.config import JudgeConfig
from graders.problems.hidden_inputs import case_arg_specs
from graders.problems.problem import Problem
from graders.verdict import CheckResult, Verdict, VerdictReport, first_verdict
from graders.verifier.client import ReferenceCheckFailed, Verifier, VerifierError, verifier_templates
from jailside.paths import local_paths
from jailside.protocol import JailRequest
from sandbox.bundle import Bundle, BundleError, parse_bundle
from sandbox.jail import JailError, JailOutcome, jail_templates, run_in_jail
from sandbox.jail_limits import MIB, JailLimits

log = logging.getLogger(__name__)


# --- from jail outcome to verdict ------------------------------------------------------------------


def _exit_text(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code > 128:
        try:
            return f"was killed by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"exited with status {code}"


def _limits_exceeded(outcome: JailOutcome, limits: JailLimits) -> list[tuple[Verdict, str]]:
    """(verdict, message) per limit the jail's run exceeded, measured outside the jail: wall and CPU
    time, memory, output, the bundle's size (in that order)."""
    candidates: list[tuple[Verdict, str]] = []
    if outcome.wall_time_exceeded:
        candidates.append(
            (
                Verdict.TIME_LIMIT_EXCEEDED,
                f"the submission ran longer than the {limits.wall_time_limit_s:g} s time limit "
                f"(an endless loop, or work far too slow to trace)",
            )
        )
    if outcome.cpu_time_exceeded:
        candidates.append(
            (Verdict.TIME_LIMIT_EXCEEDED, f"the submission used more than {limits.cpu_time_limit_s:g} s of CPU time")
        )
    if outcome.memory_exceeded:
        candidates.append(
            (
                Verdict.MEMORY_LIMIT_EXCEEDED,
                f"the submission used more than the {limits.memory_limit_mib} MiB memory limit "
                f"(on top of the JAX runtime) and was killed",
            )
        )
    if outcome.output_exceeded:
        candidates.append(
            (
                Verdict.OUTPUT_LIMIT_EXCEEDED,
                f"the submission wrote more than {limits.output_limit_bytes:,} bytes to stdout or stderr",
            )
        )
    if outcome.bundle_too_large:
        candidates.append(
            (Verdict.RUNTIME_ERROR, f"the exported programs are larger than {limits.bundle_limit_bytes:,} bytes")
        )
    return candidates


def judge_outcome(outcome: JailOutcome, limits: JailLimits) -> tuple[CheckResult, Bundle | None]:
    """Turns what was observed of the jail into the "sandbox" check, and the bundle when usable.

    Verdicts come from trusted observations first (time, memory, output: measured outside the
    jail); the bundle's own status can only make things worse for the submission, never better.
    """
    candidates = _limits_exceeded(outcome, limits)
    bundle = None
    if not candidates:
        try:
            bundle = parse_bundle(outcome.bundle, limit_bytes=limits.bundle_limit_bytes)
        except BundleError as exc:
            why = f"the process {_exit_text(outcome.exit_code)} without a valid result ({local_paths(str(exc))})"
            if outcome.exit_code == 128 + signal.SIGXFSZ:
                why += f"; it wrote a file larger than the {limits.file_size_limit_bytes:,}-byte limit"
            if outcome.process_limit_hit:
                why += f"; it hit the limit of {limits.process_limit} processes and threads"
            candidates.append((Verdict.RUNTIME_ERROR, why))
    if bundle is not None and bundle.status != "ok":
        error = bundle.error
        # the jail's text, untrusted: it names no host path whatever the jail wrote
        message = local_paths(error.message) if error else f"the submission failed ({bundle.status})"
        verdict = {"compile_error": Verdict.COMPILE_ERROR, "memory_error": Verdict.MEMORY_LIMIT_EXCEEDED}.get(
            bundle.status, Verdict.RUNTIME_ERROR
        )
        if verdict == Verdict.MEMORY_LIMIT_EXCEEDED:
            message += f" (the limit is {limits.memory_limit_mib} MiB on top of the JAX runtime)"
        candidates.append((verdict, message))
        bundle = None
    details = {
        "exit": _exit_text(outcome.exit_code),
        "wall_ms": round(outcome.wall_ms, 1),
        "cpu_ms": None if outcome.cpu_ms is None else round(outcome.cpu_ms, 1),
        "peak_memory_bytes": outcome.peak_memory_bytes,
    }
    if candidates:
        verdict = first_verdict([v for v, _ in candidates])
        message = next(m for v, m in candidates if v == verdict)
        return CheckResult(name="sandbox", passed=False, message=message, details=details, verdict=verdict), None
    assert bundle is not None
    memory = f", peak memory {outcome.peak_memory_bytes / MIB:.0f} MiB" if outcome.peak_memory_bytes else ""
    return CheckResult(
        name="sandbox",
        passed=True,
        message=f"traced and exported {len(bundle.cases)} cases in {outcome.wall_ms:.0f} ms{memory}",
        details=details,
    ), bundle


def _text(data: bytes) -> str:
    """The jail's captured output as students see it: decoded, with no host path in it (a
    library's warning on stderr names the library's file by its install path; `local_paths`)."""
    return local_paths(data.decode("utf-8", "replace"))


def internal_error_report(
    slug: str, message: str, *, version: str | None = None, t0: float | None = None, reference_check: str | None = None
) -> VerdictReport:
    """The INTERNAL_ERROR report of a judge fault: the student is told it is not their fault; the
    cause (for instructors and logs, capped at 4000 characters) goes in the check's `internal`
    details, which are stored but never in the verdict JSON students and API callers get.
    `reference_check` names the self-check the problem's reference failed, when that is the cause."""
    log.error("internal error grading %s: %s", slug, message)
    timing = {"total": (time.monotonic() - t0) * 1000} if t0 is not None else {}
    internal: dict[str, str] = {"error": message[:4000]}
    if reference_check is not None:
        internal["reference_check"] = reference_check
    return VerdictReport(
        problem=slug,
        problem_version=version,
        verdict=Verdict.INTERNAL_ERROR,
        checks=[
            CheckResult(
                name="judge", passed=False, message="the judge failed; this is not your fault", internal=internal
            )
        ],
        timing_ms=timing,
    )


def _internal(problem: Problem, message: str, t0: float) -> VerdictReport:
    return internal_error_report(problem.slug, message, version=problem.version, t0=t0)


def _reference_failed(problem: Problem, failure: ReferenceCheckFailed, t0: float) -> VerdictReport:
    return internal_error_report(
        problem.slug,
        f"the problem's reference failed its self-check, so nothing is judged against this version: {failure}",
        version=problem.version,
        t0=t0,
        reference_check=failure.check,
    )


def failed_reference_check(report: VerdictReport) -> str | None:
    """The self-check whose failure made `report` an INTERNAL_ERROR, or None."""
    for check in report.checks:
        if check.internal and "reference_check" in check.internal:
            return str(check.internal["reference_check"])
    return None


def check_reference(problem: Problem, config: JudgeConfig) -> ReferenceCheckFailed | None:
    """Builds (or loads) `problem`'s expectations in a verifier child, which runs the reference's
    self-checks (`graders.reference.build`), and waits for them.

    Returns:
        None when the reference passed (its expectations are cached for grading), else the failure.

    Raises:
        VerifierError: a fault of the judge (the verifier could not start).
    """
    verifier = Verifier.start(problem, config, ready=False)  # no child kept ready for an unpublished version
    try:
        verifier.wait_ready()
    except ReferenceCheckFailed as failure:
        return failure
    finally:
        verifier.close()
    return None


def _verify_into(report: VerdictReport, verifier: Verifier, bundle_bytes: bytes, config: JudgeConfig) -> str | None:
    """Runs the verifier on an "ok" bundle and fills `report` (checks, verdict, score, residuals).

    Returns:
        None, or the description of a judge fault (the caller reports INTERNAL_ERROR). A time-out
        or memory kill while the submission's artifacts run is the submission's verdict.
    """
    try:
        verifier.wait_ready()
        result = verifier.verify(bundle_bytes)
    except ReferenceCheckFailed:
        raise
    except VerifierError as exc:
        if exc.phase == "running" and exc.timed_out:
            verdict, message = Verdict.TIME_LIMIT_EXCEEDED, str(exc)
        elif exc.phase == "running" and exc.memory_exceeded:
            verdict, message = (
                Verdict.MEMORY_LIMIT_EXCEEDED,
                (f"running your exported program took more than {config.verifier_memory_limit_mib} MiB"),
            )
        else:
            return str(exc)
        report.checks.append(CheckResult(name="execute", passed=False, message=message, verdict=verdict))
        report.verdict = verdict
        return None
    report.checks.extend(CheckResult.model_validate(check.model_dump()) for check in result.checks)
    report.verdict = result.verdict
    report.score = result.score
    report.residuals = result.residuals
    report.program_digest = result.program_digest
    report.problem_version = result.problem_version
    report.jax_version = result.jax_version
    if verifier.cached:
        report.timing_ms["verify_cached"] = 1.0
    return None


def prestart() -> None:
    """Starts the jail and verifier templates now, side by side (each imports JAX once, about
    1.5 s), so the first submission does not wait for them one after the other.

    Raises:
        JailError: a template could not be started (judge fault).
    """
    failures: list[BaseException] = []

    def start(templates: object) -> None:
        try:
            templates.prestart()  # type: ignore[attr-defined]
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
            failures.append(exc)

    threads = [threading.Thread(target=start, args=(t(),)) for t in (jail_templates, verifier_templates)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise JailError(f"a template could not be started: {failures[0]}") from failures[0]


def judge_bundle(bundle_bytes: bytes, problem: Problem, config: JudgeConfig) -> VerdictReport:
    """Judges a result bundle as if a jail had just returned it: a fresh verifier child (cgroup,
    uid, RLIMITs, time-out) and the same verdict rules as `grade`. For forged-artifact tests and tools.

    Args:
        bundle_bytes: the bundle exactly as a jail writes it (JSON, `sandbox/bundle.py`).
        problem: the problem to judge against; config: deployment settings.

    Returns:
        The verdict report (never raises: a judge fault is INTERNAL_ERROR).
    """
    t0 = time.monotonic()
    limits = config.jail_limits_for(problem)
    report = VerdictReport(problem=problem.slug, problem_version=problem.version, checks=[])
    try:
        bundle = parse_bundle(bundle_bytes, limit_bytes=limits.bundle_limit_bytes)
    except BundleError as exc:
        report.checks.append(
            CheckResult(name="sandbox", passed=False, verdict=Verdict.RUNTIME_ERROR, message=f"no valid result ({exc})")
        )
        report.verdict = Verdict.RUNTIME_ERROR
        return report
    if bundle.status != "ok":
        report.verdict = Verdict.RUNTIME_ERROR
        return report
    try:
        verifier = Verifier.start(problem, config)
    except VerifierError as exc:
        return _internal(problem, str(exc), t0)
    try:
        fault = _verify_into(report, verifier, bundle_bytes, config)
    except ReferenceCheckFailed as failure:
        return _reference_failed(problem, failure, t0)
    finally:
        verifier.close()
    if fault is not None:
        return _internal(problem, fault, t0)
    report.timing_ms["total"] = round((time.monotonic() - t0) * 1000, 1)
    return report


def grade_once(source: str, problem: Problem, config: JudgeConfig) -> VerdictReport:
    """One attempt at grading (see `grade`)."""
    t0 = time.monotonic()
    limits = config.jail_limits_for(problem)
    verifier: Verifier | None = None
    try:
        try:
            # the verifier child loads the expectations while the jail child runs the submission
            verifier = Verifier.start(problem, config)
            request = JailRequest(
                source=source,
                entry_point=problem.spec.entry_point,
                cases=[{"name": c.name, "args": case_arg_specs(problem.spec, c)} for c in problem.spec.cases],
                cpu_time_limit_s=limits.cpu_time_limit_s,
                memory_limit_mib=limits.memory_limit_mib,
                mesh=problem.spec.mesh_plain,
            )
            outcome = run_in_jail(request, limits, keep_ready=config.ready_children, refill_ready=config.ready_refill)
        except (JailError, VerifierError) as exc:
            return _internal(problem, f"{type(exc).__name__}: {exc}", t0)
        sandbox_check, bundle = judge_outcome(outcome, limits)
        report = VerdictReport(
            problem=problem.slug,
            problem_version=problem.version,
            stdout=_text(outcome.stdout),
            stderr=_text(outcome.stderr),
            checks=[sandbox_check],
            timing_ms={"sandbox": round(outcome.wall_ms, 1)},
            jax_version=local_paths(bundle.jax_version) if bundle and bundle.jax_version else None,
        )
        if bundle is None:
            report.verdict = sandbox_check.verdict
        else:
            t1 = time.monotonic()
            try:
                fault = _verify_into(report, verifier, outcome.bundle, config)
            except ReferenceCheckFailed as failure:
                return _reference_failed(problem, failure, t0)
            if fault is not None:
                return _internal(problem, fault, t0)
            report.timing_ms["verify"] = round((time.monotonic() - t1) * 1000, 1)
        report.timing_ms["total"] = round((time.monotonic() - t0) * 1000, 1)
        return report
    except Exception as exc:  # any other fault is ours
        log.exception("grading failed")
        return _internal(problem, f"{type(exc).__name__}: {exc}", t0)
    finally:
        if verifier is not None:
            verifier.close()


def grade(
    source: str, problem: Problem, config: JudgeConfig, on_attempt: Callable[[int], None] | None = None
) -> VerdictReport:
    """Grades `source` against `problem`; a judge fault (INTERNAL_ERROR) is retried.

    Args:
        source: the submission's Python source.
        problem: the loaded problem.
        config: deployment settings.
        on_attempt: called with the attempt number (0, 1, ...) before each attempt.

    Returns:
        The verdict report (id, created_at and queue timing are the caller's to fill in).
    """
    report: VerdictReport | None = None
    for attempt in range(1 + config.retries_on_internal_error):
        if on_attempt is not None:
            on_attempt(attempt)
        report = grade_once(source, problem, config)
        if report.verdict != Verdict.INTERNAL_ERROR or failed_reference_check(report) is not None:
            break  # a failed reference fails again: not retried
    assert report is not None
    report.score = (
        report.score
        if report.verdict in (Verdict.ACCEPTED, Verdict.WRONG_POLICY, Verdict.WRONG_GRADIENT, Verdict.WRONG_ANSWER)
        else 0.0
    )
    return report
