"""The embedded mode's job queue and grading threads (one process, nothing else to install).

The queue is one small interface (`JobQueue`): `InProcessQueue` here, `server.grading.redis_jobs.RedisJobs`
when scaled out. Either way a job is a submission id and `server.grading.grader.Grader` does the rest.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Protocol

from graders.pipeline import prestart
from sandbox.jail_limits import JailCgroup
from server.grading.grader import Grader
from server.grading.sweeper import Sweeper
from server.platform import metrics
from server.store.faults import DATABASE, is_database_fault
from server.store.submissions import SubmissionStore

log = logging.getLogger(__name__)


class JobQueue(Protocol):
    """Where grading jobs (submission ids) wait."""

    def put(self, submission_id: str) -> None:
        """Enqueues one job; raises when the queue cannot take it."""
        ...


class InProcessQueue:
    """A FIFO in this process (the embedded default). Lost when the process stops; the stored
    "queued" submissions are enqueued again at the next start."""

    def __init__(self) -> None:
        self._q: queue.Queue[str] = queue.Queue()

    def put(self, submission_id: str) -> None:
        self._q.put(submission_id)

    def get(self, timeout_s: float) -> str | None:
        """The next id, or None after `timeout_s` seconds without one."""
        try:
            return self._q.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def depth(self) -> int:
        return self._q.qsize()


def start_templates_in_background() -> None:
    """Starts the jail and verifier templates (fork servers) without waiting for them."""

    def run() -> None:
        try:
            prestart()
        except Exception:  # the first submission will start them, or report why it cannot
            log.exception("the jail and verifier templates could not be started ahead of time")

    threading.Thread(target=run, name="remat-templates", daemon=True).start()


class WorkerPool:
    """`workers` threads that take ids from an `InProcessQueue` and grade them with `grader`.

    Each grading runs a jail and a verifier as child processes, so threads are enough here: the
    GIL is released while they wait.
    """

    def __init__(
        self,
        *,
        jobs: InProcessQueue,
        store: SubmissionStore,
        grader: Grader,
        workers: int,
        sweep_interval_s: float = 5.0,
    ):
        self.jobs, self.store, self.grader, self.workers = jobs, store, grader, workers
        self.sweeper = Sweeper(store, jobs.put, interval_s=sweep_interval_s)  # an in-process queue loses nothing
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Removes cgroups a previous run left, makes every claim of a previous run claimable
        again (this process is the only worker), enqueues every stored "queued" submission,
        starts the templates in the background, then the threads."""
        removed = JailCgroup.remove_stale()
        if removed:
            log.info("removed %d stale jail cgroups", removed)
        self.store.release_all()
        start_templates_in_background()
        self.sweeper.sweep(everything=True)  # the in-process queue starts empty
        self.grader.start()
        self.sweeper.start()
        metrics.IDLE_WORKERS.inc(self.workers)
        for i in range(self.workers):
            t = threading.Thread(target=self._loop, name=f"remat-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Asks the threads to stop after their current submission (what is left queued is
        enqueued again at the next start)."""
        self._stop.set()
        self.sweeper.stop()
        self.grader.stop()
        for t in self._threads:
            t.join(timeout_s)
        metrics.IDLE_WORKERS.dec(self.workers)

    def _loop(self) -> None:
        while not self._stop.is_set():
            submission_id = self.jobs.get(timeout_s=0.5)
            if submission_id is None:
                continue
            try:
                self.grader.grade(submission_id)
            except Exception as exc:  # a worker must survive anything
                if is_database_fault(exc):  # the database is away: the job waits and goes back in the queue
                    DATABASE.failed(exc, where="a grading job (retried)")
                    self._stop.wait(1.0)
                    self.jobs.put(submission_id)
                else:  # the sweeper retries later
                    log.exception("worker failed on %s", submission_id)
