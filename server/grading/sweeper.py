"""Re-enqueueing what no queue holds any more (`Sweeper`): jobs never accepted by the queue,
expired claims, and (for Redis) everything queued when the Redis server restarted and lost its
data. Safe because `server.grading.grader.Grader` grades a job once whatever its deliveries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from server.store.faults import Outage
from server.store.submissions import SubmissionStore

log = logging.getLogger(__name__)
STALE_AFTER_S = 600.0  # a queued submission enqueued this long ago is checked against what the queue holds
STALE_CHECK_S = 60.0  # how often (reading every message the queue holds is not free)
SWEEP_FAULTS = Outage("the sweeper's queue or database", log)


class Sweeper:
    """Every `interval_s`, re-enqueues the submissions no queue holds any more: those the queue
    never accepted or whose lease expired (`SubmissionStore.to_enqueue`); after
    `queue_restarted()` says the queue lost its contents (a Redis server restarted without
    persistence), every queued one the queue does not hold; and, once every `STALE_CHECK_S`,
    queued ones enqueued more than `stale_after_s` ago that the queue does not hold (a message
    lost another way). `held()` gives the ids of the messages the queue holds (Redis: waiting,
    delayed or being graded), so a restart that kept them, or a second worker's sweeper,
    re-enqueues nothing twice.

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
    ):
        self.store, self.put, self.interval_s, self.queue_restarted = store, put, interval_s, queue_restarted
        self.put_again = put_again or put  # an expired claim: ahead of the backlog where the queue can
        self.held, self.stale_after_s = held, stale_after_s
        self._last_stale_check = time.monotonic()
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._loop, name="remat-sweeper", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def sweep(self, *, everything: bool | None = None) -> int:
        """One pass; returns how many jobs it enqueued. Raises what the queue or database raise.

        Args:
            everything: enqueue every "queued" submission too (the queue lost its contents);
                None: when `queue_restarted()` says so.
        """
        if everything is None:
            everything = self.queue_restarted()
        ids = self.store.unfinished() if everything else []
        if self.held is not None and time.monotonic() - self._last_stale_check >= STALE_CHECK_S:
            self._last_stale_check = time.monotonic()
            ids += self.store.stale_queued(older_than_s=self.stale_after_s)
        if ids and self.held is not None:  # only what the queue lost
            still = self.held()
            ids = [i for i in dict.fromkeys(ids) if i not in still]
        seen = set(ids)
        jobs = [(i, False) for i in ids] + [
            (i, again)
            for i, again in self.store.to_enqueue_kinds(older_than_s=0 if everything else self.interval_s)
            if i not in seen
        ]
        ids = [i for i, _ in jobs]
        for submission_id, again in jobs:
            (self.put_again if again else self.put)(submission_id)
            self.store.mark_enqueued(submission_id)
        if ids:
            log.info("re-enqueued %d submissions%s", len(ids), " (the queue restarted)" if everything else "")
        return len(ids)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sweep()
                SWEEP_FAULTS.recovered()
            except Exception as exc:  # noqa: BLE001 - the queue or database is away; try again next time (said once)
                SWEEP_FAULTS.failed(exc)
