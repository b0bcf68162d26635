"""Re-enqueueing what no queue holds any more (`Sweeper`): jobs never accepted by the queue,
expired claims, and (for Redis) everything waiting that Redis does not hold when the Redis server
restarted and lost its data, or when a worker starts (Redis may have restarted empty while no
worker ran). Safe because `server.grading.grader.Grader` grades a job once whatever its deliveries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from server.store.faults import Outage
from server.store.submissions import SubmissionStore

log = logging.getLogger(__name__)
STALE_AFTER_S = 600.0  # a queued submission enqueued this long ago is checked against what the queue holds
STALE_CHECK_S = 60.0  # how often (reading every message the queue holds is not free)
BATCH_SIZE = 500  # submissions per read, enqueue and UPDATE of a full pass
SWEEP_FAULTS = Outage("the sweeper's queue or database", log)


class Sweeper:
    """Every `interval_s`, re-enqueues the submissions no queue holds any more: those the queue
    never accepted or whose lease expired (`SubmissionStore.to_enqueue`); and, once every
    `STALE_CHECK_S`, queued ones enqueued more than `stale_after_s` ago that the queue does not
    hold (a message lost another way).

    A full pass (`sweep(everything=True)`) re-enqueues every submission no worker holds ("queued",
    or "running" with an expired lease) that the queue does not hold, `batch_size` at a time. It
    runs when the queue lost its contents (`queue_restarted()`: a Redis server restarted without
    persistence) and, after `start(recover=True)`, once at start: a worker cannot tell whether
    Redis restarted empty while no worker ran. `held()` gives the ids of the messages the queue
    holds (Redis: waiting, delayed or being graded), so a restart that kept them, or a second
    worker's sweeper, re-enqueues nothing twice (two passes at the same moment, or one and an API
    process enqueueing, may both enqueue a submission: its first claim makes the second delivery
    a no-op, `server.grading.grader`).

    Re-enqueueing is safe because a job is graded once whatever its number of deliveries.
    """

    def __init__(
        self,
        store: SubmissionStore,
        put: Callable[[str], None],
        *,
        interval_s: float,
        queue_restarted: Callable[[], bool] = lambda: False,
        held: Callable[[], set[str]] | None = None,
        stale_after_s: float = STALE_AFTER_S,
        put_again: Callable[[str], None] | None = None,
        batch_size: int = BATCH_SIZE,
    ):
        self.store, self.put, self.interval_s, self.queue_restarted = store, put, interval_s, queue_restarted
        self.put_again = put_again or put  # an expired claim: ahead of the backlog where the queue can
        self.held, self.stale_after_s, self.batch_size = held, stale_after_s, batch_size
        self.recovering = False  # a full pass is due at the next sweep (this worker started)
        self._last_stale_check = time.monotonic()
        self._stop = threading.Event()

    def start(self, *, recover: bool = False) -> None:
        """Starts sweeping every `interval_s` in a thread of its own.

        Args:
            recover: the first sweep, at once, is a full pass (retried every `interval_s` until it
                succeeds): a worker starting, which cannot know what the queue lost before.
        """
        self.recovering = recover
        threading.Thread(target=self._loop, name="remat-sweeper", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def sweep(self, *, everything: bool | None = None) -> int:
        """One pass; returns how many jobs it enqueued. Raises what the queue or database raise
        (a full pass that was due stays due).

        Args:
            everything: a full pass (the queue lost its contents); None: when `queue_restarted()`
                says so, or when one is due since `start(recover=True)`.
        """
        why = "a full pass"
        if everything is None:
            restarted = self.queue_restarted()  # called first: it remembers the queue's identity
            everything = restarted or self.recovering
            why = "the queue restarted" if restarted else "this worker started"
        if everything:
            enqueued = self._enqueue_unclaimed(why)
            self._last_stale_check = time.monotonic()  # the full pass covered the stale ones
        else:
            enqueued = self._enqueue_stale() + self._enqueue_unaccepted()
        self.recovering = False
        return enqueued

    def _enqueue_unclaimed(self, why: str) -> int:
        """The full pass: every submission no worker holds that the queue does not hold, in
        (created_at, id) order, `batch_size` per read, enqueue and UPDATE; it stops at the newest
        one when it began (later ones are their enqueuer's). Returns how many it enqueued."""
        # read before the queue's messages: a submission stored later is its enqueuer's, and the
        # message of one stored earlier that reached the queue meanwhile is among them
        until = self.store.newest_unclaimed()
        if until is None:
            log.info("re-enqueued 0 submissions (%s): none waits", why)
            return 0
        held = self.held() if self.held is not None else set()
        after: tuple[datetime, str] | None = None
        seen = enqueued = 0
        while True:
            page = self.store.unclaimed(after=after, until=until, limit=self.batch_size)
            batch = [s for s in page if s.id not in held]
            for submission in batch:
                (self.put_again if submission.expired else self.put)(submission.id)
            self.store.mark_enqueued_many([s.id for s in batch])
            seen, enqueued = seen + len(page), enqueued + len(batch)
            if len(page) < self.batch_size:
                break
            after = (page[-1].created_at, page[-1].id)
        log.info(
            "re-enqueued %d submissions (%s): %d wait unclaimed, %d of them still held by the queue",
            enqueued,
            why,
            seen,
            seen - enqueued,
        )
        return enqueued

    def _enqueue_stale(self) -> int:
        """Once every `STALE_CHECK_S` (a queue that can say what it holds): queued submissions
        enqueued more than `stale_after_s` ago whose message the queue does not hold."""
        if self.held is None or time.monotonic() - self._last_stale_check < STALE_CHECK_S:
            return 0
        self._last_stale_check = time.monotonic()
        ids = self.store.stale_queued(older_than_s=self.stale_after_s)
        if not ids:
            return 0
        still = self.held()
        ids = [i for i in ids if i not in still]
        for submission_id in ids:
            self.put(submission_id)
        self.store.mark_enqueued_many(ids)
        if ids:
            log.info("re-enqueued %d submissions (their messages were lost)", len(ids))
        return len(ids)

    def _enqueue_unaccepted(self) -> int:
        """Submissions the queue never accepted (stored `interval_s` ago or more) and expired
        claims not enqueued again since, these ahead of the backlog."""
        jobs = self.store.to_enqueue_kinds(older_than_s=self.interval_s)
        for submission_id, again in jobs:
            (self.put_again if again else self.put)(submission_id)
            self.store.mark_enqueued(submission_id)
        if jobs:
            log.info("re-enqueued %d submissions", len(jobs))
        return len(jobs)

    def _loop(self) -> None:
        wait_s = 0.0 if self.recovering else self.interval_s
        while not self._stop.wait(wait_s):
            wait_s = self.interval_s
            try:
                self.sweep()
                SWEEP_FAULTS.recovered()
            except Exception as exc:  # noqa: BLE001 - the queue or database is away; try again next time (said once)
                SWEEP_FAULTS.failed(exc)
