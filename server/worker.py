"""`remat-judge worker`: a grading process of the distributed mode.

Takes jobs from Redis (Dramatiq), grades them with `server.grading.grader.Grader` (its own fork servers
for jails and verifiers) and announces each stored verdict on Redis. At start it re-enqueues every
waiting submission Redis does not hold (`server.grading.sweeper`): Redis may have restarted empty
while no worker ran. Any number of workers may run on any number of machines, sharing the
database, Redis, the problem packages and the hidden seed. SIGTERM or SIGINT stops it gracefully:
it takes no new job, finishes the ones it holds (up to `STOP_TIMEOUT_S`), and leaves the rest for
the other workers.
"""

from __future__ import annotations

import logging
import signal
import threading

from graders.problems.problem import ProblemRepository
from sandbox.jail_limits import JailCgroup
from server.grading.queue import start_templates_in_background
from server.grading.redis_jobs import RedisJobs
from server.grading.sweeper import Sweeper
from server.platform import metrics
from server.runtime import build_grader, open_database, start_warmup
from server.settings import Settings
from server.store.submissions import SubmissionStore

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 120


def run(
    settings: Settings,
    *,
    concurrency: int,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    stop: threading.Event | None = None,
) -> None:
    """Runs a worker until SIGTERM/SIGINT (or `stop` is set).

    Args:
        settings: the deployment's settings; `redis_url` is required.
        concurrency: submissions graded at once (threads; each runs a jail and a verifier child).
        metrics_port: serve this worker's Prometheus metrics on http://metrics_host:port/metrics.

    Raises:
        ValueError: no Redis URL is configured.
        RuntimeError: the database is not migrated to the latest revision.
    """
    redis_url = settings.redis_url
    if not redis_url:
        raise ValueError("a worker needs REMAT_JUDGE_REDIS_URL (the distributed mode)")
    settings = settings.model_copy(update={"workers": concurrency})  # ready children: one per thread
    stop = stop or threading.Event()
    _stop_on_signals(stop)
    try:
        engine = open_database(settings, stop=stop)  # PostgreSQL down or restarting: wait, said once
    except InterruptedError:
        return
    store = SubmissionStore(engine)
    problems = ProblemRepository(settings.problems_dir)
    jobs = RedisJobs(redis_url, heartbeat_timeout_s=settings.heartbeat_timeout_s)
    grader = build_grader(settings, engine, store, problems, kind="worker", on_finished=jobs.announce)
    worker_id = grader.worker_id
    jobs.run = grader.grade  # this process runs the jobs it is given
    sweeper = _sweeper(settings, store, jobs)
    _prepare_host(metrics_port, metrics_host)
    worker = jobs.worker(concurrency)
    grader.start()
    warmup = start_warmup(settings, problems)  # in the background: jobs are taken meanwhile
    # At once: remember the Redis server's identity and re-enqueue every waiting submission it
    # does not hold (it may have restarted empty while no worker ran); retried while Redis is away.
    sweeper.start(recover=True)
    metrics.IDLE_WORKERS.inc(concurrency)
    worker.start()
    log.info("worker %s: %d grading threads, problems from %s", worker_id, concurrency, settings.problems_dir)
    try:
        stop.wait()
    finally:
        log.info("worker %s stopping", worker_id)
        if warmup is not None:
            warmup.stop()
        sweeper.stop()
        worker.stop(timeout=STOP_TIMEOUT_S * 1000)
        grader.stop()
        metrics.IDLE_WORKERS.dec(concurrency)
        jobs.close()
        engine.dispose()


def _stop_on_signals(stop: threading.Event) -> None:
    """Sets `stop` on SIGTERM and SIGINT (only the main thread may handle signals)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: stop.set())


def _sweeper(settings: Settings, store: SubmissionStore, jobs: RedisJobs) -> Sweeper:
    """The sweeper of a worker: it re-enqueues on Redis only what Redis does not hold, an expired
    claim ahead of the backlog; a full pass at start (`Sweeper.start(recover=True)`) and after
    each Redis restart."""
    return Sweeper(
        store,
        jobs.put,
        interval_s=settings.sweep_interval_s,
        queue_restarted=jobs.restarted,
        held=jobs.held,
        put_again=lambda submission_id: jobs.put(submission_id, again=True),
    )


def _prepare_host(metrics_port: int | None, metrics_host: str) -> None:
    """Before taking jobs: removes the jail cgroups a dead worker left, starts the jail and
    verifier templates (fork servers) in the background, and serves the metrics when asked."""
    removed = JailCgroup.remove_stale()
    if removed:
        log.info("removed %d stale jail cgroups", removed)
    start_templates_in_background()
    if metrics_port is not None:
        metrics.serve(metrics_port, metrics_host)
