"""Children started before their job arrives, so isolation is off a verdict's critical path.

A child of a template (`sandbox.supervise.Child`) spends most of its start before the job's own
input matters: the fork, its own cgroup and uid, the trusted `prepare` step (the verifier loads a
problem version's expectations), lock-down and starting the CPU backend. Then it blocks reading
its stdin. `ReadyChildren` does all of that ahead of time: when a job takes a child, a new one
with the same limits and set-up is started in the background while that job runs, and the next
job with the same key takes it already waiting on its stdin (docs/ARCHITECTURE.md, "Ready
children").

What does not change: each child still serves one job and exits; it is forked from the template,
which holds no job data, so a ready child holds nothing of any earlier job; it is in its own
cgroup, uid and namespaces before the next job's input exists, and that input reaches it only
through its own stdin. A ready child is keyed by everything it was started with (its
`ChildLimits` and the job's `prepare` parameters): a job with another key (another problem
version, other limits) gets a fresh child, never one prepared for something else.

Standard library plus `sandbox`; no JAX here (the server imports this module).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from sandbox.child_limits import ChildLimits
from sandbox.supervise import Child
from sandbox.templates import SupervisorError, Templates

log = logging.getLogger(__name__)

# A child started ahead prepares itself on CPU time the running jobs leave idle: its cgroup's CPU
# weight is 1 (cgroup v2 units; v1 cpu.shares 10) until a job takes it, then the default 100. Measured
# on 2 cores: starting the replacement at full weight while the job ran made the job's jail phase
# slower than the start-up it saved (docs/ARCHITECTURE.md, "Ready children").
WAITING_CPU_WEIGHT = 1
DEFAULT_CPU_WEIGHT = 100


def child_key(limits: ChildLimits, job: dict[str, Any]) -> str:
    """What makes two children interchangeable: every limit and every `prepare` parameter (a
    SHA-256 hex digest, so a parameter such as the verifier's seed is not kept in the clear)."""
    material = json.dumps({"limits": asdict(limits), "job": job}, sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


class ReadyChildren:
    """Up to `keep` children of one template kind, started ahead and waiting for their job.

    Thread-safe. `take(limits, job, keep=n)` returns a waiting child with the same key when there
    is one (a "hit"), else starts one now as before (a "miss"). After a hit, a miss with nothing
    waiting, or a miss for the key taken last, a replacement with the same key starts in a
    background thread (when `keep > 0`). The
    oldest waiting children beyond `keep` are closed, so a worker holds at most `keep` waiting
    children of a kind (one per grading thread is the server's default: `Settings.ready_children`).

    Args:
        templates: a function returning the template set to fork from.
    """

    def __init__(self, templates: Callable[[], Templates]):
        self._templates = templates
        self._waiting: list[tuple[str, Child]] = []  # oldest first
        self._starting = 0
        self._last_key: str | None = None
        self._lock = threading.Condition()
        self._closed = False
        self.hits = 0
        self.misses = 0

    def take(
        self, limits: ChildLimits, job: dict[str, Any] | None = None, *, keep: int = 0, refill: bool = True
    ) -> Child:
        """A child for one job: a waiting one with the same key, or one started now.

        Args:
            limits: the child's limits.
            job: its `prepare` parameters.
            keep: children of this kind to keep waiting after this call (0: none, and any
                still waiting are closed).
            refill: False: start no replacement now (those waiting stay). The grader passes
                False while submissions are queued: the next job is already there, a child
                started ahead would save it nothing and might be for another problem.

        Raises:
            SupervisorError: no child could be started (a judge fault).
        """
        job = job or {}
        key = child_key(limits, job)
        found: Child | None = None
        stale: list[Child] = []
        with self._lock:
            for index, (waiting_key, child) in enumerate(self._waiting):
                if waiting_key == key:
                    del self._waiting[index]
                    found = child
                    break
            if found is not None and not found.waiting():
                stale.append(found)  # died while waiting (an OOM while loading, a killed process)
                found = None
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
            # Refill after a hit, when nothing waits, or when this key was also the last one taken:
            # the same key is then the likely next (a student resubmitting, a class on one exercise).
            # After a miss beside children waiting for other keys, the next key cannot be told (a
            # burst across many problems): a replacement would mostly be started for nothing, so
            # those waiting stay for their own keys.
            likely = found is not None or not self._waiting or key == self._last_key
            self._last_key = key
            refill = refill and likely and keep > 0 and not self._closed and self._starting < keep
            if refill:
                self._starting += 1
            excess = len(self._waiting) + self._starting - keep if keep > 0 else len(self._waiting)
            if excess > 0:
                stale += [child for _, child in self._waiting[:excess]]
                del self._waiting[:excess]
        for child in stale:
            child.close()
        if found is not None:
            found.set_cpu_weight(DEFAULT_CPU_WEIGHT)  # its job is on the critical path now
        if refill:
            threading.Thread(target=self._start_one, args=(key, limits, job), name="ready-child", daemon=True).start()
        return found if found is not None else Child.start(self._templates(), limits, job)

    def _start_one(self, key: str, limits: ChildLimits, job: dict[str, Any]) -> None:
        child: Child | None = None
        try:
            child = Child.start(self._templates(), limits, job, cpu_weight=WAITING_CPU_WEIGHT)
        except SupervisorError as exc:
            log.warning("could not start a ready child: %s", exc)
        except Exception:  # a fault here must not kill the thread silently; the next take starts one
            log.exception("could not start a ready child")
        with self._lock:
            self._starting -= 1
            if child is not None and not self._closed:
                self._waiting.append((key, child))
                child = None
            self._lock.notify_all()
        if child is not None:
            child.close()

    def settle(self, timeout_s: float) -> bool:
        """Waits until no child is being started in the background; False if `timeout_s` passed."""
        with self._lock:
            return self._lock.wait_for(lambda: self._starting == 0, timeout=timeout_s)

    def waiting(self) -> int:
        """How many children wait now."""
        with self._lock:
            return len(self._waiting)

    def children(self) -> list[Child]:
        """The children waiting now, oldest first (a snapshot: for tests and benchmarks)."""
        with self._lock:
            return [child for _, child in self._waiting]

    def drain(self) -> int:
        """Closes every waiting child now (later takes keep refilling); returns how many."""
        with self._lock:
            children = [child for _, child in self._waiting]
            self._waiting.clear()
        for child in children:
            child.close()
        return len(children)

    def close(self) -> None:
        """Closes every waiting child (killed, cgroup removed, uid returned); later takes start
        children as they are needed and keep none. Idempotent."""
        with self._lock:
            self._closed = True
        self.drain()


def shared_ready(templates: Callable[[], Templates]) -> Callable[[], ReadyChildren]:
    """A function that returns this process's one `ReadyChildren` of a template kind, made on its
    first call and closed when the process exits (its waiting children killed, cgroups removed)."""
    lock = threading.Lock()
    made: list[ReadyChildren] = []

    def get() -> ReadyChildren:
        with lock:
            if not made:
                made.append(ReadyChildren(templates))
                atexit.register(made[0].close)
            return made[0]

    return get
