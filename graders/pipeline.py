"""Grading one submission end to end: jail, bundle, verifier process, verdict report.

The same function serves the server's workers and `remat-judge grade`. It never imports or runs
submission code: that happens in the jail, and the artifacts run in the verifier process.
"""

from __future__ import annotations

import json
import logging
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from graders.problem import Problem, case_arg_specs
from graders.verdict import CheckResult, ResidualReport, Verdict, VerdictReport, first_verdict
from graders.verifier import VerifyLimits
from sandbox.bundle import Bundle, BundleError, parse_bundle
from sandbox.jail import SANDBOX_DIR, Jail, JailError, JailOutcome, JailRequest
from sandbox.limits import MIB, JailCgroup, JailLimits

if TYPE_CHECKING:
    from graders.pool import WarmPool

log = logging.getLogger(__name__)
KEPT_STDERR_BYTES = 64 * 1024


@dataclass(frozen=True)
class JudgeConfig:
    """Everything grading needs besides the submission and the problem.

    Attributes:
        cache_dir: where reference expectations are cached (trusted side only).
        seed: the deployment's secret hidden-input seed (bytes).
        jail_limits: default jail limits; a problem's `[limits]` overrides some.
        verify_limits: caps on artifacts before they run.
        verify_time_limit_s: wall seconds for running a submission's artifacts.
        verify_startup_time_limit_s: wall seconds for the verifier to start and, on a cache miss,
            build the reference's expectations.
        verifier_memory_limit_mib: memory cap of the verifier process.
        retries_on_internal_error: how often a judge fault is retried before INTERNAL_ERROR stands.
    """

    cache_dir: Path
    seed: bytes
    jail_limits: JailLimits = field(default_factory=JailLimits)
    verify_limits: VerifyLimits = field(default_factory=VerifyLimits)
    verify_time_limit_s: float = 60.0
    verify_startup_time_limit_s: float = 600.0
    verifier_memory_limit_mib: int = 4096
    retries_on_internal_error: int = 1

    def jail_limits_for(self, problem: Problem) -> JailLimits:
        """The deployment's limits with the problem's overrides applied."""
        overrides = {k: v for k, v in problem.spec.limits.model_dump().items() if v is not None}
        return replace(self.jail_limits, **overrides)


class VerifierError(Exception):
    """The verifier process failed. `phase` is "startup" (judge fault) or "running" (the artifact ran)."""

    def __init__(self, message: str, *, phase: str, timed_out: bool = False, memory_exceeded: bool = False):
        super().__init__(message)
        self.phase, self.timed_out, self.memory_exceeded = phase, timed_out, memory_exceeded


class VerifierProcess:
    """One verifier process (graders/verify_main.py) under a cgroup and RLIMITs, single use."""

    def __init__(self, proc: subprocess.Popen[bytes], cgroup: JailCgroup | None, config: JudgeConfig):
        self.proc, self.cgroup, self.config = proc, cgroup, config
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr = bytearray()
        self.running = False
        self.assigned_at = time.monotonic()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    @classmethod
    def start(cls, config: JudgeConfig, problem: Problem) -> "VerifierProcess":
        """Spawns a verifier and hands it `problem`; it loads the expectations while the jail runs."""
        made = cls.spawn(config)
        made.assign(problem)
        return made

    @classmethod
    def spawn(cls, config: JudgeConfig) -> "VerifierProcess":
        """Spawns a verifier that imports JAX and then waits for `assign` (it can be started early)."""
        import os

        memory = config.verifier_memory_limit_mib * MIB
        cgroup = JailCgroup.create(memory_limit_bytes=memory, process_limit=256) if os.geteuid() == 0 else None
        cpu_s = int(config.verify_startup_time_limit_s + config.verify_time_limit_s) + 1
        rlimits = {"RLIMIT_CPU": [cpu_s, cpu_s + 1], "RLIMIT_CORE": [0, 0],
                   "RLIMIT_FSIZE": [1 << 30, 1 << 30]}
        if cgroup is None:
            rlimits["RLIMIT_AS"] = [memory + (4096 * MIB), memory + (4096 * MIB)]
        setup = {"procs": cgroup.procs_files if cgroup else [], "rlimits": rlimits,
                 "die_with_parent": True, "parent_pid": os.getpid()}
        argv = [sys.executable, "-I", "-S", str(SANDBOX_DIR / "enter.py"), json.dumps(setup),
                sys.executable, "-m", "graders.verify_main"]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, cwd=str(Path(__file__).resolve().parents[1]),
                                env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2",
                                     "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"})
        return cls(proc, cgroup, config)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def assign(self, problem: Problem) -> None:
        """Hands the verifier its problem (it then loads or builds the reference's expectations)."""
        config = self.config
        line = json.dumps({"problem_dir": str(problem.root), "problem_version": problem.version,
                           "cache_dir": str(config.cache_dir),
                           "seed_hex": config.seed.hex(),
                           "limits": {"max_artifact_bytes": config.verify_limits.max_artifact_bytes,
                                      "max_ops": config.verify_limits.max_ops,
                                      "max_peak_live_bytes": config.verify_limits.max_peak_live_bytes,
                                      "max_depth": config.verify_limits.max_depth,
                                      "max_call_depth": config.verify_limits.max_call_depth},
                           "bundle_limit_bytes": config.jail_limits.bundle_limit_bytes})
        self.assigned_at = time.monotonic()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # it died; wait_ready reports why

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.events.put(json.loads(raw))
            except ValueError:
                continue
        self.events.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):  # type: ignore[union-attr]
            room = KEPT_STDERR_BYTES - len(self.stderr)
            if room > 0:
                self.stderr += chunk[:room]

    def _next_event(self, deadline: float) -> dict[str, Any] | None:
        try:
            return self.events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError from None

    def _failure(self, message: str, *, timed_out: bool = False) -> VerifierError:
        self._kill()
        memory = self.cgroup.oom_killed() if self.cgroup else False  # read before close() removes it
        self.close()
        phase = "running" if self.running else "startup"
        tail = bytes(self.stderr).decode("utf-8", "replace")[-1500:]
        return VerifierError(f"{message}; verifier stderr: {tail}" if tail and phase == "startup" else message,
                             phase=phase, timed_out=timed_out, memory_exceeded=memory)

    def wait_ready(self) -> float:
        """Blocks until the expectations are loaded; returns the milliseconds it took.

        Raises:
            VerifierError: with phase "startup" (a judge fault).
        """
        deadline = self.assigned_at + self.config.verify_startup_time_limit_s
        try:
            event = self._next_event(deadline)
        except TimeoutError:
            raise self._failure("the verifier did not start in time", timed_out=True) from None
        if event is None or event.get("event") != "ready":
            message = (event or {}).get("message", "the verifier exited during start-up")
            raise self._failure(f"verifier start-up failed: {message}")
        return float(event.get("ms", 0.0))

    def verify(self, bundle_bytes: bytes) -> dict[str, Any]:
        """Sends the bundle and waits for the result event.

        From the moment the bundle is sent, a time-out or memory kill belongs to the submission:
        the verifier is reading or running its artifacts (phase "running"). An "error" event is
        an exception in our code, never the submission's (phase "startup": INTERNAL_ERROR).

        Raises:
            VerifierError: phase "running" for a time-out or memory kill, else phase "startup".
        """
        assert self.proc.stdin is not None
        self.running = True  # from here the verifier reads and runs untrusted artifacts
        writer = threading.Thread(target=self._send, args=(bundle_bytes,), daemon=True)
        writer.start()
        deadline = time.monotonic() + self.config.verify_time_limit_s
        while True:
            try:
                event = self._next_event(deadline)
            except TimeoutError:
                raise self._failure(f"the exported program ran longer than {self.config.verify_time_limit_s:g} s",
                                    timed_out=True) from None
            if event is None:
                raise self._failure("the verifier died")
            kind = event.get("event")
            if kind == "running":
                self.running = True
                deadline = time.monotonic() + self.config.verify_time_limit_s
            elif kind == "result":
                self.close()
                return event
            elif kind == "memory_error":
                err = self._failure("the exported program ran out of memory")
                err.memory_exceeded = True
                raise err
            elif kind == "error":
                self.running = False  # an exception in our code: never the submission's fault
                raise self._failure(f"verifier error: {event.get('message')}\n{event.get('traceback', '')}")

    def _send(self, data: bytes) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except OSError:
            pass

    def _kill(self) -> None:
        """Kills the process group (if alive) and reaps it; the cgroup stays, for its facts."""
        if self.proc.poll() is None:
            try:
                import os

                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("verifier %s did not die", self.proc.pid)

    def close(self) -> None:
        """Kills the process (if alive) and removes its cgroup. Idempotent."""
        self._kill()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None


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


def judge_outcome(outcome: JailOutcome, limits: JailLimits) -> tuple[CheckResult, Bundle | None]:
    """Turns what was observed of the jail into the "sandbox" check, and the bundle when usable.

    Verdicts come from trusted observations first (time, memory, output: measured outside the
    jail); the bundle's own status can only make things worse for the submission, never better.
    """
    candidates: list[tuple[Verdict, str]] = []
    if outcome.wall_time_exceeded:
        candidates.append((Verdict.TIME_LIMIT_EXCEEDED,
                           f"the submission ran longer than the {limits.wall_time_limit_s:g} s time limit "
                           f"(an endless loop, or work far too slow to trace)"))
    if outcome.cpu_time_exceeded:
        candidates.append((Verdict.TIME_LIMIT_EXCEEDED,
                           f"the submission used more than {limits.cpu_time_limit_s:g} s of CPU time"))
    if outcome.memory_exceeded:
        candidates.append((Verdict.MEMORY_LIMIT_EXCEEDED,
                           f"the submission used more than the {limits.memory_limit_mib} MiB memory limit "
                           f"(on top of the JAX runtime) and was killed"))
    if outcome.output_exceeded:
        candidates.append((Verdict.OUTPUT_LIMIT_EXCEEDED,
                           f"the submission wrote more than {limits.output_limit_bytes:,} bytes to stdout or "
                           f"stderr"))
    if outcome.bundle_too_large:
        candidates.append((Verdict.RUNTIME_ERROR,
                           f"the exported programs are larger than {limits.bundle_limit_bytes:,} bytes"))
    bundle = None
    if not candidates:
        try:
            bundle = parse_bundle(outcome.bundle, limit_bytes=limits.bundle_limit_bytes)
        except BundleError as exc:
            why = f"the process {_exit_text(outcome.exit_code)} without a valid result ({exc})"
            if outcome.exit_code == 128 + signal.SIGXFSZ:
                why += f"; it wrote a file larger than the {limits.file_size_limit_bytes:,}-byte limit"
            if outcome.process_limit_hit:
                why += f"; it hit the limit of {limits.process_limit} processes and threads"
            candidates.append((Verdict.RUNTIME_ERROR, why))
    if bundle is not None and bundle.status != "ok":
        error = bundle.error
        message = error.message if error else f"the submission failed ({bundle.status})"
        verdict = {"compile_error": Verdict.COMPILE_ERROR, "memory_error": Verdict.MEMORY_LIMIT_EXCEEDED}.get(
            bundle.status, Verdict.RUNTIME_ERROR)
        if verdict == Verdict.MEMORY_LIMIT_EXCEEDED:
            message += f" (the limit is {limits.memory_limit_mib} MiB on top of the JAX runtime)"
        candidates.append((verdict, message))
        bundle = None
    details = {"exit": _exit_text(outcome.exit_code), "wall_ms": round(outcome.wall_ms, 1),
               "cpu_ms": None if outcome.cpu_ms is None else round(outcome.cpu_ms, 1),
               "peak_memory_bytes": outcome.peak_memory_bytes}
    if candidates:
        verdict = first_verdict([v for v, _ in candidates])
        message = next(m for v, m in candidates if v == verdict)
        return CheckResult(name="sandbox", passed=False, message=message, details=details, verdict=verdict), None
    assert bundle is not None
    memory = f", peak memory {outcome.peak_memory_bytes / MIB:.0f} MiB" if outcome.peak_memory_bytes else ""
    return CheckResult(name="sandbox", passed=True,
                       message=f"traced and exported {len(bundle.cases)} cases in {outcome.wall_ms:.0f} ms{memory}",
                       details=details), bundle


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def internal_error_report(slug: str, message: str, *, version: str | None = None,
                          t0: float | None = None) -> VerdictReport:
    """The INTERNAL_ERROR report of a judge fault: the student is told it is not their fault; the
    cause (for instructors and logs, capped at 4000 characters) goes in the check's `internal`
    details, which are stored but never in the verdict JSON students and API callers get."""
    log.error("internal error grading %s: %s", slug, message)
    timing = {"total": (time.monotonic() - t0) * 1000} if t0 is not None else {}
    return VerdictReport(problem=slug, problem_version=version, verdict=Verdict.INTERNAL_ERROR,
                         checks=[CheckResult(name="judge", passed=False,
                                             message="the judge failed; this is not your fault",
                                             internal={"error": message[:4000]})],
                         timing_ms=timing)


def _internal(problem: Problem, message: str, t0: float) -> VerdictReport:
    return internal_error_report(problem.slug, message, version=problem.version, t0=t0)


def _verify_into(report: VerdictReport, verifier: VerifierProcess, bundle_bytes: bytes,
                 config: JudgeConfig) -> str | None:
    """Runs the verifier on an "ok" bundle and fills `report` (checks, verdict, score, residuals).

    Returns:
        None, or the description of a judge fault (the caller reports INTERNAL_ERROR). A time-out
        or memory kill while the submission's artifacts run is the submission's verdict.
    """
    try:
        verifier.wait_ready()
        result = verifier.verify(bundle_bytes)
    except VerifierError as exc:
        if exc.phase == "running" and exc.timed_out:
            verdict, message = Verdict.TIME_LIMIT_EXCEEDED, str(exc)
        elif exc.phase == "running" and exc.memory_exceeded:
            verdict, message = Verdict.MEMORY_LIMIT_EXCEEDED, (
                f"running your exported program took more than {config.verifier_memory_limit_mib} MiB")
        else:
            return str(exc)
        report.checks.append(CheckResult(name="execute", passed=False, message=message, verdict=verdict))
        report.verdict = verdict
        return None
    report.checks += [CheckResult.model_validate({**c, "verdict": c.get("verdict")}) for c in result["checks"]]
    report.verdict = Verdict(result["verdict"])
    report.score = float(result["score"])
    report.residuals = ResidualReport.model_validate(result["residuals"]) if result["residuals"] else None
    report.problem_version = result.get("problem_version", report.problem_version)
    report.jax_version = result.get("jax_version")
    return None


def judge_bundle(bundle_bytes: bytes, problem: Problem, config: JudgeConfig) -> VerdictReport:
    """Judges a result bundle as if a jail had just returned it: a fresh verifier process (cgroup,
    RLIMITs, time-out) and the same verdict rules as `grade`. For forged-artifact tests and tools.

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
        report.checks.append(CheckResult(name="sandbox", passed=False, verdict=Verdict.RUNTIME_ERROR,
                                         message=f"no valid result ({exc})"))
        report.verdict = Verdict.RUNTIME_ERROR
        return report
    if bundle.status != "ok":
        report.verdict = Verdict.RUNTIME_ERROR
        return report
    verifier = VerifierProcess.spawn(config)
    try:
        verifier.assign(problem)
        fault = _verify_into(report, verifier, bundle_bytes, config)
    finally:
        verifier.close()
    if fault is not None:
        return _internal(problem, fault, t0)
    report.timing_ms["total"] = round((time.monotonic() - t0) * 1000, 1)
    return report


def grade_once(source: str, problem: Problem, config: JudgeConfig, pool: "WarmPool | None" = None) -> VerdictReport:
    """One attempt at grading (see `grade`)."""
    t0 = time.monotonic()
    limits = config.jail_limits_for(problem)
    jail: Jail | None = None
    verifier: VerifierProcess | None = None
    try:
        try:
            jail = pool.jail(limits) if pool is not None else Jail.start(limits)
            verifier = pool.verifier() if pool is not None else VerifierProcess.spawn(config)
            verifier.assign(problem)
            request = JailRequest(source=source, entry_point=problem.spec.entry_point,
                                  cases=[{"name": c.name, "args": case_arg_specs(problem.spec, c)}
                                         for c in problem.spec.cases],
                                  cpu_time_limit_s=limits.cpu_time_limit_s,
                                  memory_limit_mib=limits.memory_limit_mib)
            outcome = jail.run(request)
        except JailError as exc:
            return _internal(problem, f"jail: {exc}", t0)
        sandbox_check, bundle = judge_outcome(outcome, limits)
        report = VerdictReport(problem=problem.slug, problem_version=problem.version,
                               stdout=_text(outcome.stdout), stderr=_text(outcome.stderr),
                               checks=[sandbox_check], timing_ms={"sandbox": round(outcome.wall_ms, 1)},
                               jax_version=bundle.jax_version if bundle else None)
        if bundle is None:
            report.verdict = sandbox_check.verdict
        else:
            assert verifier is not None  # started before the jail ran
            t1 = time.monotonic()
            fault = _verify_into(report, verifier, outcome.bundle, config)
            if fault is not None:
                return _internal(problem, fault, t0)
            report.timing_ms["verify"] = round((time.monotonic() - t1) * 1000, 1)
        report.timing_ms["total"] = round((time.monotonic() - t0) * 1000, 1)
        return report
    except Exception as exc:  # any other fault is ours
        log.exception("grading failed")
        return _internal(problem, f"{type(exc).__name__}: {exc}", t0)
    finally:
        if jail is not None:
            jail.close()
        if verifier is not None:
            verifier.close()


def grade(source: str, problem: Problem, config: JudgeConfig,
          on_attempt: Callable[[int], None] | None = None, pool: "WarmPool | None" = None) -> VerdictReport:
    """Grades `source` against `problem`; a judge fault (INTERNAL_ERROR) is retried.

    Args:
        source: the submission's Python source.
        problem: the loaded problem.
        config: deployment settings.
        on_attempt: called with the attempt number (0, 1, ...) before each attempt.
        pool: pre-started jails and verifiers to use (graders/pool.py), or None to start them.

    Returns:
        The verdict report (id, created_at and queue timing are the caller's to fill in).
    """
    report: VerdictReport | None = None
    for attempt in range(1 + config.retries_on_internal_error):
        if on_attempt is not None:
            on_attempt(attempt)
        report = grade_once(source, problem, config, pool)
        if pool is not None:
            pool.refill(config.jail_limits_for(problem))
        if report.verdict != Verdict.INTERNAL_ERROR:
            break
    assert report is not None
    report.score = report.score if report.verdict in (Verdict.ACCEPTED, Verdict.WRONG_POLICY,
                                                      Verdict.WRONG_GRADIENT, Verdict.WRONG_ANSWER) else 0.0
    return report
