"""The distributed job queue: Dramatiq messages in Redis, acknowledged after the verdict is stored.

Why Dramatiq (docs/ARCHITECTURE.md, "Scale-out"): its Redis broker acknowledges a message only
when the actor returns, keeps every unacknowledged message in a per-worker set, and moves the sets
of workers whose heartbeat stopped back to the queue, so a worker killed mid-job has its job
delivered to another. Celery needs `acks_late` plus `reject_on_worker_lost` and waits out a 1 h
visibility timeout by default; Huey loses a killed worker's task.

Delivery is at least once; grading is once: the job is only a submission id, and
`server.grading.grader.Grader` claims the stored submission before grading it.

Timings (settings): a worker counts as dead `heartbeat_timeout_s` after its last heartbeat (every
broker call is one; an idle worker polls about once a second); each broker call runs maintenance
(moving dead workers' messages back) with probability MAINTENANCE_PER_MILLION / 10^6.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import TimeLimit, default_middleware

from server.store.faults import DATABASE, is_database_fault

log = logging.getLogger(__name__)

NAMESPACE = "remat-judge"
QUEUE_NAME = "grading"
ACTOR_NAME = "grade_submission"
AGAIN_QUEUE_NAME = "grading-again"  # jobs whose worker died: ahead of the backlog
AGAIN_ACTOR_NAME = "grade_submission_again"
FINISHED_CHANNEL = "remat-judge:finished"  # pub/sub: ids whose verdict was just stored
MAINTENANCE_PER_MILLION = 200_000  # 20% of broker calls look for dead workers (Dramatiq's default: 0.1%)
MAX_BACKOFF_MS = 10_000  # between retries of a job whose function raised (the database was away)
SOCKET_TIMEOUT_S = 5.0


class QueueUnavailable(Exception):
    """Redis cannot be reached (or refused the command)."""


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=2.0, health_check_interval=10
    )


class RedisJobs:
    """Enqueues grading jobs in Redis (API processes) and runs them (`remat-judge worker`).

    Args:
        url: the Redis URL (`redis://host:6379/0`).
        heartbeat_timeout_s: seconds without a heartbeat after which a worker counts as dead.
        run: what a worker does with a job (`Grader.grade`); API processes leave the default,
            which only enqueues.
    """

    def __init__(self, url: str, *, heartbeat_timeout_s: float = 20.0, run: Callable[[str], Any] | None = None):
        self.url = url
        # Dramatiq's TimeLimit interrupts a job with an asynchronous exception, which could land
        # in the middle of storing a verdict; the judge's own limits bound a grading instead.
        middleware = [m() for m in default_middleware if m is not TimeLimit]
        self.broker = RedisBroker(
            url=url,
            namespace=NAMESPACE,
            middleware=middleware,
            heartbeat_timeout=int(heartbeat_timeout_s * 1000),
            maintenance_chance=MAINTENANCE_PER_MILLION,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=2.0,
        )
        self.run = run  # what a worker does with a job; None in API processes

        def grade_submission(submission_id: str) -> None:
            if self.run is None:
                raise RuntimeError("this process only enqueues jobs")
            try:
                self.run(submission_id)
            except Exception as exc:
                if not is_database_fault(exc):
                    raise
                # the database is away: try the job later, without a traceback per attempt
                # (Dramatiq does not log `Retry`; the outage is logged once, `server.store.faults`)
                DATABASE.failed(exc, where="a grading job (retried)")
                raise dramatiq.Retry(f"the database is unavailable: {type(exc).__name__}") from None

        # A job is retried for as long as it fails: the grading function raises only for faults of
        # the infrastructure (the database away), never for a submission, and giving up would
        # strand its row "queued" (the sweeper's stale bound is the second line of defence).
        options: dict[str, Any] = dict(
            retry_when=lambda retries, exc: True, min_backoff=1000, max_backoff=MAX_BACKOFF_MS
        )
        self.actor: dramatiq.Actor[[str], None] = dramatiq.actor(  # type: ignore[call-overload]
            grade_submission, broker=self.broker, actor_name=ACTOR_NAME, queue_name=QUEUE_NAME, priority=10, **options
        )
        # A job whose worker died waits behind no backlog: it has a queue of its own, which every
        # worker consumes beside the main one, and goes first in a worker's local work queue
        # (Dramatiq orders it by actor priority, lower first).
        self.again: dramatiq.Actor[[str], None] = dramatiq.actor(  # type: ignore[call-overload]
            grade_submission,
            broker=self.broker,
            actor_name=AGAIN_ACTOR_NAME,
            queue_name=AGAIN_QUEUE_NAME,
            priority=0,
            **options,
        )
        self.client = _client(url)
        self._run_id: str | None = None

    def put(self, submission_id: str, *, again: bool = False) -> None:
        """Enqueues the grading of `submission_id`; `again`: a claim that expired (its worker
        died), which goes ahead of the backlog (its own queue).

        Raises:
            QueueUnavailable: Redis did not take it.
        """
        try:
            (self.again if again else self.actor).send(submission_id)
        except (redis.RedisError, dramatiq.errors.BrokerConnectionError, OSError) as exc:
            raise QueueUnavailable(f"the grading queue (Redis) is unavailable: {exc}") from None

    def available(self) -> bool:
        """Whether Redis answers a PING now."""
        try:
            return bool(self.client.ping())
        except (redis.RedisError, OSError):
            return False

    def announce(self, submission_id: str) -> None:
        """Tells every API process that `submission_id` has its verdict (pub/sub; best effort:
        waiting requests also poll the database)."""
        self.client.publish(FINISHED_CHANNEL, submission_id)

    def restarted(self) -> bool:
        """True once after the Redis server changed (its `run_id`) since the previous call: a
        restart without persistence loses every queued job, which the sweeper then re-enqueues.
        The first call only remembers it (False): what a restart lost before the worker started
        is the sweeper's start-up pass (`Sweeper.start(recover=True)`).

        Raises:
            QueueUnavailable: Redis cannot be reached.
        """
        try:
            run_id = str(self.client.info("server").get("run_id"))
        except (redis.RedisError, OSError) as exc:
            raise QueueUnavailable(str(exc)) from None
        changed = self._run_id is not None and run_id != self._run_id
        self._run_id = run_id
        return changed

    def held(self) -> set[str]:
        """The submission ids of every message Redis holds now (waiting, delayed for a retry, or
        being graded: a message leaves Redis when it is acknowledged).

        Raises:
            QueueUnavailable: Redis cannot be reached.
        """
        ids: set[str] = set()
        try:
            for name in (QUEUE_NAME, f"{QUEUE_NAME}.DQ", AGAIN_QUEUE_NAME, f"{AGAIN_QUEUE_NAME}.DQ"):
                for raw in self.client.hvals(f"{NAMESPACE}:{name}.msgs"):
                    try:
                        args = json.loads(raw).get("args") or []
                    except (ValueError, AttributeError):
                        continue
                    if args and isinstance(args[0], str):
                        ids.add(args[0])
        except (redis.RedisError, OSError) as exc:
            raise QueueUnavailable(str(exc)) from None
        return ids

    def worker(self, concurrency: int) -> dramatiq.Worker:
        """A Dramatiq worker running `concurrency` grading threads, each holding at most one
        unacknowledged job (so a killed worker delays at most `concurrency` jobs)."""
        worker = dramatiq.Worker(self.broker, worker_threads=concurrency, worker_timeout=1000)
        worker.queue_prefetch = concurrency
        return worker

    def close(self) -> None:
        try:
            self.broker.close()
            self.client.close()
        except Exception:  # noqa: BLE001 - closing a connection that is already gone
            pass
