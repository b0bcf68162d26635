"""Pre-started single-use jails and verifier processes.

Importing JAX takes about 1.3 s of the 2.2 s from POST to verdict (measured, bench/latency.py), in
the jail and in the verifier alike. A pool keeps processes that have already imported it, waiting:
a jail waits for its submission on stdin, a verifier for its problem. Each still serves exactly one
submission and is torn down after it; the pool only moves the start-up off the critical path.

Processes are started by the thread that takes from the pool (a verifier dies with the thread that
started it, through PR_SET_PDEATHSIG), so take from long-lived threads: the server's workers, or
a program's main thread.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from graders.pipeline import JudgeConfig, VerifierProcess
from sandbox.jail import Jail
from sandbox.limits import JailLimits


def _jail_key(limits: JailLimits) -> JailLimits:
    """The limits fixed when a jail starts (its cgroup, tmpfs and RLIMITs); wall and CPU time are
    applied per submission, so a warm jail serves any."""
    return replace(limits, wall_time_limit_s=0.0, cpu_time_limit_s=0.0)


class WarmPool:
    """Keeps up to `size` started jails per set of start-time limits, and `size` verifiers.

    Args:
        config: the judge configuration every verifier of this pool uses.
        size: how many of each kind to keep ready (one per concurrent grader is enough).
    """

    def __init__(self, config: JudgeConfig, *, size: int = 1):
        self.config, self.size = config, size
        self._jails: dict[JailLimits, list[Jail]] = {}
        self._verifiers: list[VerifierProcess] = []
        self._lock = threading.Lock()
        self._closed = False

    def jail(self, limits: JailLimits) -> Jail:
        """A jail for `limits`: a warm one when the pool has it, else a new one."""
        with self._lock:
            waiting = self._jails.get(_jail_key(limits), [])
            taken = self._first_alive(waiting)
        if taken is None:
            return Jail.start(limits)
        taken.limits = limits  # the same start-time limits; this submission's wall and CPU time
        return taken

    def verifier(self) -> VerifierProcess:
        """A verifier process that has imported JAX (warm when the pool has one), not yet assigned."""
        with self._lock:
            taken = self._first_alive(self._verifiers)
        return taken if taken is not None else VerifierProcess.spawn(self.config)

    @staticmethod
    def _first_alive(waiting: list) -> "Jail | VerifierProcess | None":
        while waiting:
            candidate = waiting.pop(0)
            if candidate.alive():
                return candidate
            candidate.close()
        return None

    def refill(self, limits: JailLimits) -> None:
        """Starts what the pool lacks, for `limits` (call it after a grading: the new processes then
        import JAX while the judge is idle, not while a submission is being judged)."""
        key = _jail_key(limits)
        with self._lock:
            if self._closed:
                return
            jails_needed = self.size - len(self._jails.setdefault(key, []))
            verifiers_needed = self.size - len(self._verifiers)
        started_jails = [Jail.start(limits) for _ in range(max(0, jails_needed))]
        started_verifiers = [VerifierProcess.spawn(self.config) for _ in range(max(0, verifiers_needed))]
        with self._lock:
            if not self._closed:
                self._jails[key].extend(started_jails)
                self._verifiers.extend(started_verifiers)
                return
        for process in [*started_jails, *started_verifiers]:
            process.close()

    def close(self) -> None:
        """Kills every waiting process. Idempotent."""
        with self._lock:
            self._closed = True
            jails = [j for waiting in self._jails.values() for j in waiting]
            verifiers = list(self._verifiers)
            self._jails.clear()
            self._verifiers.clear()
        for jail in jails:
            jail.close()
        for verifier in verifiers:
            verifier.close()
