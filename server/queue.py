"""The job queue and the worker pool that grades queued submissions.

The queue is one small interface (`JobQueue`): the embedded default is an in-process queue; a
Redis-backed queue can implement the same two methods for scale-out without touching workers.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable, Protocol

from graders.pipeline import JudgeConfig, grade, internal_error_report, prestart
from graders.problem import ProblemError, ProblemRepository
from graders.verdict import VerdictReport
from sandbox.limits import JailCgroup
from server.db import SubmissionStore, utcnow

log = logging.getLogger(__name__)


class JobQueue(Protocol):
    """Submission ids waiting to be graded."""

    def put(self, submission_id: str) -> None: ...

    def get(self, timeout_s: float) -> str | None:
        """The next id, or None after `timeout_s` seconds without one."""
        ...

    def depth(self) -> int: ...


class InProcessQueue:
    """A FIFO in this process (the embedded default)."""

    def __init__(self) -> None:
        self._q: queue.Queue[str] = queue.Queue()

    def put(self, submission_id: str) -> None:
        self._q.put(submission_id)

    def get(self, timeout_s: float) -> str | None:
        try:
            return self._q.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def depth(self) -> int:
        return self._q.qsize()


class Completions:
    """Lets request handlers wait for a submission to be graded."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._done: set[str] = set()

    def notify(self, submission_id: str) -> None:
        with self._cond:
            self._done.add(submission_id)
            self._cond.notify_all()

    def wait(self, submission_id: str, is_done: Callable[[], bool], timeout_s: float) -> bool:
        """Blocks until the submission is done or `timeout_s` passes; returns whether it is done."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if submission_id in self._done or is_done():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 1.0))


class WorkerPool:
    """Threads that take ids from the queue, grade them through the pipeline and store verdicts.

    Each grading runs a jail and a verifier as child processes, so threads are enough here: the
    GIL is released while they wait.
    """

    def __init__(self, *, jobs: JobQueue, store: SubmissionStore, problems: ProblemRepository,
                 config_factory: Callable[[], JudgeConfig], workers: int, completions: Completions):
        self.jobs, self.store, self.problems = jobs, store, problems
        self.config_factory, self.workers, self.completions = config_factory, workers, completions
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Requeues what was queued or running when the server last stopped, removes cgroups its
        jails left behind, starts the jail and verifier templates in the background, then workers."""
        removed = JailCgroup.remove_stale()
        if removed:
            log.info("removed %d stale jail cgroups", removed)
        threading.Thread(target=self._prestart, name="remat-templates", daemon=True).start()
        for submission_id in self.store.unfinished():
            self.jobs.put(submission_id)
        for i in range(self.workers):
            t = threading.Thread(target=self._loop, name=f"remat-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Asks workers to stop after their current submission (unfinished ones are requeued on restart)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout_s)

    @staticmethod
    def _prestart() -> None:
        try:
            prestart()
        except Exception:  # the first submission will start them, or report why it cannot
            log.exception("the jail and verifier templates could not be started ahead of time")

    def _loop(self) -> None:
        while not self._stop.is_set():
            submission_id = self.jobs.get(timeout_s=0.5)
            if submission_id is None:
                continue
            try:
                self.grade_one(submission_id)
            except Exception:  # a worker must survive anything
                log.exception("worker failed on %s", submission_id)

    def grade_one(self, submission_id: str) -> None:
        """Grades one stored submission and stores its verdict. Whatever fails here, the
        submission ends "done" (INTERNAL_ERROR at worst), never stuck in "running"."""
        record = self.store.mark_running(submission_id)
        if record is None:
            return
        try:
            report = self._grade(record.problem, record.source)
        except Exception as exc:
            log.exception("grading %s failed", submission_id)
            report = internal_error_report(record.problem, f"{type(exc).__name__}: {exc}")
        queue_ms = (record.started_at - record.created_at).total_seconds() * 1000 if record.started_at else 0.0
        report.id = record.id
        report.status = "done"
        report.timing_ms = {"queue": round(queue_ms, 1), **report.timing_ms}
        report.created_at = record.created_at.isoformat()
        report.finished_at = utcnow().isoformat()
        assert report.verdict is not None
        self.store.finish(submission_id, verdict=report.verdict.value, score=report.score,
                          problem_version=report.problem_version, result_json=report.stored_json())
        self.completions.notify(submission_id)
        log.info("graded %s (%s): %s in %.0f ms", submission_id, record.problem, report.verdict.value,
                 report.timing_ms.get("total", 0.0))

    def _grade(self, slug: str, source: str) -> VerdictReport:
        try:
            problem = self.problems.get(slug)
        except (KeyError, ProblemError) as exc:
            return internal_error_report(slug, f"the problem cannot be loaded: {exc}")
        return grade(source, problem, self.config_factory())

