"""The trusted side of verification: a verifier child per submission, and the result cache.

`Verifier.start(problem, config)` forks a child of the verifier template (`graders/verifier/main.py`)
through `sandbox/supervise.py`: its own cgroup (memory cap, CPU accounting), an unprivileged uid,
no network, RLIMITs and a time-out. The child loads the expectations while the jail runs; then
`verify(bundle)` sends the bundle and reads its events (`graders/verifier/events.py`).

Results are cached by content (`ResultCache`): the child reports a digest of the bundle's
normalized artifacts (debug locations stripped) before it runs anything; when a result for the
same digest, problem version, seed and limits is stored, the child is killed and the stored
result used. No JAX here: the server imports this module.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import sys
import time
from dataclasses import asdict
from pathlib import Path

from graders.atomic_files import replace_atomically
from graders.config import JudgeConfig
from graders.problems.problem import Problem
from graders.reference.expectation import META_FILE, cache_dir
from graders.verifier.code_version import judging_code_digest
from graders.verifier.events import (
    Digest,
    Error,
    EventError,
    OutOfMemory,
    Ready,
    ReferenceFailed,
    Result,
    Running,
    VerifierParams,
    parse_event,
)
from jailside.frameworks import framework_versions
from jailside.protocol import SIMULATED_DEVICES_FLAG
from sandbox.child_limits import HOST_MEMORY_KILL, ChildLimits
from sandbox.jail_limits import MIB
from sandbox.ready import shared_ready
from sandbox.supervise import Child
from sandbox.templates import SupervisorError, Templates, TemplateSpec, shared_templates

log = logging.getLogger(__name__)
CHECKOUT = Path(__file__).resolve().parents[2]
"""The checkout this module was imported from (the folder holding `graders/`): the verifier children
import its code, first on their `sys.path`, never another checkout's through the virtualenv's
editable install."""
CODE_PACKAGES = ("graders", "jailside", "sandbox")
"""The checkout's packages a verifier child may import from, after lock-down too (`ChildLimits.expose`)."""
# `-I`: no PYTHONPATH, user site or working directory on sys.path; the checkout goes first by hand.
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from graders.verifier.main import main; sys.exit(main(sys.argv))"
)
KEPT_STDERR_BYTES = 64 * 1024
# 2: programs compiled with evaluate.COMPILER_OPTIONS; 3: the reference self-checks (no per-submission
# finite differences), memory kinds, calibrated peak slack, the recompute check; 4: program digests;
# 5: each check's instructor-only details inside the check (`ReportedCheck`); 6: FLOPs of what runs
# (graders.untrusted.flops) and the recompute bound judged on the largest case
RESULT_CACHE_FORMAT = 7  # 7: gradients of float input leaves only
MAX_FORKS_PER_TEMPLATE = 500


class VerifierError(Exception):
    """The verifier failed. `phase` is "startup" (judge fault) or "running" (the artifact ran)."""

    def __init__(self, message: str, *, phase: str, timed_out: bool = False, memory_exceeded: bool = False):
        super().__init__(message)
        self.phase, self.timed_out, self.memory_exceeded = phase, timed_out, memory_exceeded


class ReferenceCheckFailed(VerifierError):
    """The problem's reference failed self-checks (`graders.reference.failures.SELF_CHECKS`): the author's
    fault. No submission is judged against that version.

    Attributes:
        failures: (check, what went wrong for the author) per failed self-check.
        check: the first failed self-check.
    """

    def __init__(self, failures: list[tuple[str, str]]):
        super().__init__("\n".join(f"reference.py: {c}: {m}" for c, m in failures), phase="startup")
        self.failures = failures
        self.check = failures[0][0]


def reference_budget_s(problem: Problem, config: JudgeConfig) -> tuple[float, float]:
    """(export budget, startup deadline) of building `problem`'s expectations, in wall seconds.

    The export budget is the jail's `wall_time_limit_s` for the problem: exporting every case once
    takes a submission that long at most, so the reference must too (the child checks it). The
    deadline bounds the whole build from outside (the child exports every case about five times:
    float32 twice, float64, no checkpoint, everything recomputed; and runs them): five export
    budgets, twice the verifier's time limit, and 30 s, at most `verify_startup_time_limit_s`.
    """
    budget = config.jail_limits_for(problem).wall_time_limit_s
    return budget, min(config.verify_startup_time_limit_s, 5 * budget + 2 * config.verify_time_limit_s + 30.0)


def template_spec() -> TemplateSpec:
    """How the supervisor starts the verifier template: this interpreter, isolated (`-I`), running
    `graders.verifier.main` from this module's own checkout (`CHECKOUT`, first on its sys.path), an
    environment of six variables (no secret of the judge's; `XLA_FLAGS` gives every mesh's
    devices), cwd that checkout."""
    checkout = str(CHECKOUT).replace("{", "{{").replace("}", "}}")  # the supervisor fills in {control_fd}
    return TemplateSpec(
        name="verifier",
        argv=lambda: [sys.executable, "-I", "-B", "-c", BOOTSTRAP, checkout, "{control_fd}", "{seccomp_fd}"],
        cwd=str(CHECKOUT),
        memory_limit_bytes=2 << 30,
        startup_time_limit_s=120.0,
        env={
            "PATH": "/usr/bin:/bin",
            "JAX_PLATFORMS": "cpu",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "XLA_FLAGS": SIMULATED_DEVICES_FLAG,  # every mesh's devices (jailside.mesh)
        },
    )


verifier_templates = shared_templates(template_spec, max_forks=MAX_FORKS_PER_TEMPLATE)
"""This process's verifier template set (one template, shared by every grading thread)."""
verifier_ready = shared_ready(verifier_templates)
"""This process's verifier children started ahead, each with one problem version's expectations
loaded (`sandbox.ready`: keyed by the version, the seed and the limits)."""


def child_limits(config: JudgeConfig) -> ChildLimits:
    """A verifier child's limits: the configured memory cap; CPU time for start-up plus the run."""
    cpu_s = int(config.verify_startup_time_limit_s + config.verify_time_limit_s) + 1
    return ChildLimits(
        memory_limit_bytes=config.verifier_memory_limit_mib * MIB,
        process_limit=256,
        own_uid=True,
        rlimits={"RLIMIT_CPU": [cpu_s, cpu_s + 1], "RLIMIT_CORE": [0, 0], "RLIMIT_FSIZE": [64 * MIB, 64 * MIB]},
        unshare=("mount", "ipc", "uts", "net"),
        tmpfs_bytes=64 * MIB,
        seccomp=True,
        expose=tuple(dict.fromkeys([sys.base_prefix, sys.prefix, *(str(CHECKOUT / p) for p in CODE_PACKAGES)])),
        output_caps={"result": 64 * MIB},
        kept_bytes={"stdout": 4096, "stderr": KEPT_STDERR_BYTES},
        startup_time_limit_s=config.verify_startup_time_limit_s,
    )


def _jax_version() -> str:
    """The installed JAX's version, from its package metadata (without importing JAX)."""
    return importlib.metadata.version("jax")


class ResultCache:
    """Verifier results by content key, as JSON files under `root` (atomic writes).

    The key covers the normalized artifacts and residual notes (the child's digest), the problem
    slug and version, a hash of the seed (never the seed), the verify limits, the JAX version, the
    model libraries' versions (`jailside.frameworks`: a framework reference's expectations follow
    them), the judging code's own digest (`graders.verifier.code_version`) and RESULT_CACHE_FORMAT:
    two submissions with the same key get the same checks, by construction.
    """

    def __init__(self, root: Path):
        self.root = root

    @staticmethod
    def key(digest: str, problem: Problem, config: JudgeConfig) -> str:
        material = {
            "format": RESULT_CACHE_FORMAT,
            "code": judging_code_digest(),
            "digest": digest,
            "slug": problem.slug,
            "jax": _jax_version(),
            "frameworks": framework_versions(),
            "version": problem.version,
            "seed": hashlib.sha256(config.seed).hexdigest(),
            "limits": asdict(config.verify_limits),
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, jax_version: str | None = None) -> Result | None:
        """The stored result, or None (missing, unreadable or of another JAX version)."""
        try:
            result = Result.model_validate_json(self._path(key).read_bytes())
        except (OSError, ValueError):
            return None
        return result if jax_version is None or result.jax_version == jax_version else None

    def put(self, key: str, result: Result) -> None:
        """Stores `result` (`replace_atomically`), best effort: a write that fails (a full disk) is
        logged, not raised, and leaves no temporary file in the cache."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_atomically(path, result.model_dump_json().encode(), mode=0o600)
        except OSError as exc:
            log.warning("cannot store a verifier result: %s", exc)


class Verifier:
    """One verifier child, single use. `Verifier.start` returns at once; the child loads the
    expectations in the background while the jail runs."""

    def __init__(self, child: Child, problem: Problem, config: JudgeConfig):
        self.child, self.problem, self.config = child, problem, config
        self.running = False
        self.cached = False
        self.started_at = time.monotonic()
        self._pending: list[bytes] = []

    @classmethod
    def start(
        cls, problem: Problem, config: JudgeConfig, templates: Templates | None = None, *, ready: bool = True
    ) -> Verifier:
        """A verifier child for `problem`: one already waiting with this version's expectations
        loaded when there is one (`verifier_ready`), else one forked now. Unless `ready` is False
        (a reference check of a version not yet published) or `templates` is given, a replacement
        starts in the background when `config.ready_children` > 0 and `config.ready_refill`.

        Raises:
            VerifierError: phase "startup" (the template or the child could not be started).
        """
        config_limits = config.verify_limits
        params = VerifierParams(
            problem_dir=str(problem.root),
            problem_slug=problem.slug,
            problem_version=problem.version,
            cache_dir=str(config.cache_dir),
            seed_hex=config.seed.hex(),
            limits={k: int(v) for k, v in asdict(config_limits).items()},
            bundle_limit_bytes=config.jail_limits.bundle_limit_bytes,
            reference_export_budget_s=reference_budget_s(problem, config)[0],
        )
        try:
            if templates is None and ready:
                child = verifier_ready().take(
                    child_limits(config), params.model_dump(), keep=config.ready_children, refill=config.ready_refill
                )
            else:
                child = Child.start(templates or verifier_templates(), child_limits(config), params.model_dump())
        except SupervisorError as exc:
            raise VerifierError(f"the verifier could not start: {exc}", phase="startup") from None
        return cls(child, problem, config)

    def _next_event(
        self, deadline: float
    ) -> Ready | Digest | Running | Result | Error | OutOfMemory | ReferenceFailed | None:
        """The next event; None when the child's pipes closed (it died).

        Raises:
            TimeoutError: none before `deadline` (monotonic seconds).
        """
        while not self._pending:
            self._pending = self.child.take_lines("result")
            if self._pending:
                break
            if "result" in self.child.exceeded:
                return None
            got_line = lambda c: b"\n" in c.buffers["result"]  # noqa: E731
            finished = self.child.pump(deadline, stop=got_line)
            self._pending = self.child.take_lines("result")
            if not self._pending and not finished:
                raise TimeoutError
            if not self._pending and self.child.finished:
                return None
        line = self._pending.pop(0)
        try:
            return parse_event(line)
        except EventError as exc:
            raise self._failure(f"the verifier sent a malformed event: {exc}") from None

    def _failure(self, message: str, *, timed_out: bool = False) -> VerifierError:
        self.child.kill()
        facts = self.child.facts()  # read before close() removes the cgroup
        lockdown = self.child.lockdown_error()
        self.close()
        phase = "running" if self.running and not lockdown else "startup"
        tail = bytes(self.child.buffers["stderr"]).decode("utf-8", "replace")[-1500:]
        if lockdown:
            message = f"{message}: the verifier failed before its job began ({lockdown})"
        elif tail and phase == "startup":
            message = f"{message}; verifier stderr: {tail}"
        if facts.host_memory_kill:  # not memory_exceeded: a judge fault in either phase, retried
            message = f"{message}; {HOST_MEMORY_KILL} ({facts.memory_kill_evidence})"
        return VerifierError(message, phase=phase, timed_out=timed_out, memory_exceeded=facts.oom_killed)

    def _building(self) -> bool:
        """Whether the child had to build the expectations (no cache entry for this version)."""
        return not (cache_dir(self.config.cache_dir, self.problem, self.config.seed) / META_FILE).is_file()

    def wait_ready(self) -> float:
        """Blocks until the expectations are loaded; returns the milliseconds that took.

        Raises:
            ReferenceCheckFailed: the reference failed a self-check (reported by the child; or the
                build ran past its deadline, time_limit; or out of memory, memory_limit).
            VerifierError: phase "startup" (a judge fault).
        """
        budget_s, deadline_s = reference_budget_s(self.problem, self.config)
        building = self._building()
        try:
            event = self._next_event(self.started_at + deadline_s)
        except TimeoutError:
            if building:
                self._failure("the reference's expectations took too long to build", timed_out=True)
                raise ReferenceCheckFailed(
                    [
                        (
                            "time_limit",
                            f"building the reference's expectations did not finish in {deadline_s:g} s "
                            f"(every case is exported about five times and run): make the reference or the "
                            f"cases faster, or raise [limits] wall_time_limit_s (now {budget_s:g} s)",
                        )
                    ]
                ) from None
            raise self._failure("the verifier did not start in time", timed_out=True) from None
        if isinstance(event, ReferenceFailed):
            self.close()
            raise ReferenceCheckFailed([(f.check, f.message) for f in event.failures])
        if isinstance(event, Error):
            raise self._failure(f"verifier start-up failed: {event.message}")
        if not isinstance(event, Ready):
            failure = self._failure("the verifier exited during start-up")
            if building and failure.memory_exceeded:
                raise ReferenceCheckFailed(
                    [
                        (
                            "memory_limit",
                            f"building the reference's expectations ran out of the verifier's "
                            f"{self.config.verifier_memory_limit_mib} MiB: make the cases smaller",
                        )
                    ]
                ) from None
            raise failure
        return event.ms

    def verify(self, bundle_bytes: bytes) -> Result:
        """Sends the bundle and waits for the result (or a stored result for the same content).

        From the moment the bundle is sent, a time-out or memory kill belongs to the submission:
        the child is reading or running its artifacts (phase "running"). An `error` event is an
        exception in our code, never the submission's (phase "startup": INTERNAL_ERROR); nor is
        an OOM kill for the host's memory (`ChildFacts.host_memory_kill`: not `memory_exceeded`).

        Raises:
            VerifierError: phase "running" for a time-out or memory kill, else phase "startup".
        """
        cache = ResultCache(self.config.results_dir) if self.config.results_dir is not None else None
        key = None
        self.running = True  # from here the child reads and runs untrusted artifacts
        self.child.send_input(bundle_bytes)
        deadline = time.monotonic() + self.config.verify_time_limit_s
        while True:
            try:
                event = self._next_event(deadline)
            except TimeoutError:
                raise self._failure(
                    f"the exported program ran longer than {self.config.verify_time_limit_s:g} s", timed_out=True
                ) from None
            if event is None:
                raise self._failure("the verifier died")
            if isinstance(event, Digest):
                if cache is None:
                    continue
                key = cache.key(event.digest, self.problem, self.config)
                stored = cache.get(key)
                if stored is not None:
                    self.cached = True
                    self.child.close(wait=False)
                    return stored
            elif isinstance(event, Running):
                deadline = time.monotonic() + self.config.verify_time_limit_s
            elif isinstance(event, Result):
                self.child.close(wait=False)  # killed now; its teardown is off the critical path
                if cache is not None and key is not None:
                    cache.put(key, event)
                return event
            elif isinstance(event, OutOfMemory):
                err = self._failure("the exported program ran out of memory")
                err.memory_exceeded = True
                raise err
            elif isinstance(event, Error):
                self.running = False  # an exception in our code: never the submission's fault
                raise self._failure(f"verifier error: {event.message}\n{event.traceback}")
            else:
                raise self._failure(f"the verifier sent {event.event!r} out of order")

    def close(self) -> None:
        """Kills the child (if alive), removes its cgroup, returns its uid. Idempotent."""
        self.child.close()
