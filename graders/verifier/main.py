"""The verifier's template process (zygote): imports JAX and our verifier once, then forks one
child per submission. `python -m graders.verifier.main CONTROL_FD SECCOMP_FD`, started by
`graders/verifier/client.py` through `sandbox/supervise.py`.

The template holds no problem, expectation, seed or submission: each child receives its
parameters (`graders.verifier.events.VerifierParams`) after the fork, in its `JobSetup`. A child:

1. (`prepare`, still root, already inside its own cgroup, before any untrusted byte) loads the
   problem and the reference's cached expectations, building them on a cache miss; a package on
   disk whose version differs from the worker's is refused (a judge fault);
2. locks down (`jailside/forkserver.py`): new network, IPC, UTS and mount namespaces with a
   private /tmp, RLIMITs, an unprivileged uid without capabilities, no_new_privs, seccomp;
3. (`run`) starts the CPU backend, says `ready`, reads the bundle from stdin, and reports
   `digest`, `running` and `result` (or `error`, `memory_error`) as JSON lines on its result pipe
   (`graders/verifier/events.py`).

An exception in our code is the judge's fault (INTERNAL_ERROR, an `error` event); a time-out or
memory kill once the bundle has been sent belongs to the submission's artifacts, which the child
is then reading or running.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from graders.verifier.events import (
    Digest,
    Error,
    OutOfMemory,
    Ready,
    ReferenceFailed,
    ReportedCheck,
    Result,
    Running,
    SelfCheckFailure,
    VerifierParams,
    encode_event,
)


class VerifierJob:
    """One submission's verification in one child (the `Job` of `jailside/forkserver.py`)."""

    def __init__(self) -> None:
        self.problem: Any = None
        self.expectations: Any = None
        self.params: VerifierParams | None = None
        self.loaded_ms = 0.0
        self.reference_failure: ReferenceFailed | None = None

    def prepare(self, params: dict[str, Any]) -> None:
        """Loads the problem and its expectations (root's file access, before lock-down).

        Raises:
            RuntimeError: the package on disk is another version than the one being judged.
            Whatever loading or building the expectations raises (judge faults).
        """
        from graders.artifact_limits import VerifyLimits
        from graders.problems.problem import load_problem
        from graders.reference.build import ensure_expectations
        from graders.reference.failures import ReferenceCheckError

        t0 = time.monotonic()
        self.params = VerifierParams.model_validate(params)
        problem = load_problem(Path(self.params.problem_dir), slug=self.params.problem_slug or None)
        if problem.version != self.params.problem_version:
            raise RuntimeError(
                f"the worker judges {problem.slug} version {self.params.problem_version}, but "
                f"the package now on disk is version {problem.version}"
            )
        self.problem = problem
        try:
            self.expectations = ensure_expectations(
                problem,
                seed=bytes.fromhex(self.params.seed_hex),
                cache_root=Path(self.params.cache_dir),
                export_budget_s=self.params.reference_export_budget_s,
                limits=VerifyLimits(**self.params.limits),
            )
        except ReferenceCheckError as failure:  # the author's fault: reported instead of `ready`
            self.reference_failure = ReferenceFailed(
                failures=[
                    SelfCheckFailure.model_validate({"check": c, "message": m[:4000]}) for c, m in failure.failures
                ]
            )
        self.params = self.params.model_copy(update={"seed_hex": ""})  # not needed past this point
        self.loaded_ms = (time.monotonic() - t0) * 1000

    def run(self, result_fd: int) -> int:
        """Verifies the bundle read from stdin; events go to `result_fd`. Returns the exit code."""
        import jax

        from graders.artifact_limits import VerifyLimits
        from graders.verifier.verify import verify
        from sandbox.bundle import BundleError, parse_bundle

        out = os.fdopen(result_fd, "wb", buffering=0)

        def emit(event: Any) -> None:
            out.write(encode_event(event))

        assert self.params is not None
        if self.reference_failure is not None:
            emit(self.reference_failure)
            return 1
        jax.devices()  # start the CPU backend (about 12 ms of CPU; no warm-up compile)
        emit(Ready(ms=self.loaded_ms, version=self.problem.version))
        data = sys.stdin.buffer.read(self.params.bundle_limit_bytes + 1)
        t1 = time.monotonic()
        try:
            bundle = parse_bundle(data, limit_bytes=self.params.bundle_limit_bytes)
        except BundleError as exc:
            emit(Error(message=f"bundle rejected after the parent accepted it: {exc}"))
            return 1
        try:
            result = verify(
                bundle,
                self.problem,
                self.expectations,
                limits=VerifyLimits(**self.params.limits),
                on_digest=lambda digest: emit(Digest(digest=digest)),
                on_execute=lambda: emit(Running()),
            )
        except MemoryError:
            emit(OutOfMemory())
            return 1
        except Exception as exc:  # noqa: BLE001 - a fault of ours (or of XLA): never blamed on the submission
            emit(Error(message=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()))
            return 1
        emit(
            Result(
                verdict=result.verdict,
                score=result.score,
                checks=[
                    ReportedCheck.model_validate({**c.model_dump(), "internal": c.internal}) for c in result.checks
                ],
                residuals=result.residuals,
                problem_version=self.problem.version,
                jax_version=jax.__version__,
                verify_ms=(time.monotonic() - t1) * 1000,
                program_digest=result.program_digest,
            )
        )
        return 0


def main(argv: list[str]) -> int:
    control_fd, seccomp_fd = int(argv[1]), int(argv[2])
    with os.fdopen(seccomp_fd, "rb") as f:
        seccomp_bpf = f.read(1 << 20)
    t0 = time.monotonic()
    import jax  # noqa: F401 - imported once per template; the backend starts in each child
    from jax import export  # noqa: F401

    import graders.reference.build
    import graders.verifier.verify  # noqa: F401
    from jailside import forkserver
    from jailside.frameworks import import_frameworks
    from jailside.warmup import warm_up

    import_frameworks()  # a framework reference is run in a verifier child
    warm_up(calls_exported=True)

    return forkserver.serve(control_fd, VerifierJob, seccomp_bpf=seccomp_bpf, import_ms=(time.monotonic() - t0) * 1000)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
