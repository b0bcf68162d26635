"""A worker's start-up pass (server/grading/sweeper.py `Sweeper.start(recover=True)`): every
submission no worker holds that the queue does not hold is enqueued once, in batches, against the
real SQLite store migrated by the real chain. The queue is a list here (the sweeper's interface
is two callables); tests/e2e/test_redis_restart.py runs the same against a real redis-server."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.grading.sweeper import Sweeper
from server.store import migrate
from server.store.db import make_engine
from server.store.submissions import SubmissionStatus, SubmissionStore

DEADLINE_S = 10.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SubmissionStore]:
    url = f"sqlite:///{tmp_path / 'judge.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    yield SubmissionStore(engine)
    engine.dispose()


class Queue:
    """What Redis would hold: the ids put (in order), and the ones it is said to hold already."""

    def __init__(self, held: set[str] | None = None):
        self.put: list[str] = []
        self.put_again: list[str] = []
        self.already = set(held or ())
        self.changed = threading.Event()

    def held(self) -> set[str]:
        return self.already | set(self.put) | set(self.put_again)

    def sweeper(self, store: SubmissionStore, **kwargs: object) -> Sweeper:
        def put(submission_id: str) -> None:
            self.put.append(submission_id)
            self.changed.set()

        def again(submission_id: str) -> None:
            self.put_again.append(submission_id)
            self.changed.set()

        return Sweeper(store, put, interval_s=60, held=self.held, put_again=again, **kwargs)  # type: ignore[arg-type]


def test_the_start_up_pass_enqueues_every_unclaimed_submission_the_queue_lost_once_in_batches(
    store: SubmissionStore, caplog: pytest.LogCaptureFixture
) -> None:
    waiting = [store.create(problem="p", source=f"# {i}").id for i in range(7)]
    for submission_id in waiting:
        store.mark_enqueued(submission_id)  # accepted by a queue that then lost them
    kept = waiting[1]  # its message survived
    grading = store.create(problem="p", source="# grading").id  # a live claim: not the pass's
    assert store.claim(grading, worker_id="alive", lease_s=300, max_attempts=3).record is not None
    dead = store.create(problem="p", source="# dead").id  # an expired claim: ahead of the backlog
    assert store.claim(dead, worker_id="gone", lease_s=-1, max_attempts=3).record is not None
    graded = store.create(problem="p", source="# graded").id
    assert store.claim(graded, worker_id="w", lease_s=300, max_attempts=3).record is not None
    assert store.finish(graded, verdict="ACCEPTED", score=1.0, problem_version="v", result_json="{}")
    queue = Queue(held={kept})
    sweeper = queue.sweeper(store, batch_size=2)
    sweeper.recovering = True  # what start(recover=True) sets
    with caplog.at_level(logging.INFO, logger="server.grading.sweeper"):
        assert sweeper.sweep() == 7
    assert queue.put == [i for i in waiting if i != kept] and queue.put_again == [dead]
    assert "re-enqueued 7 submissions (this worker started): 8 wait unclaimed, 1 of them still held" in caplog.text
    records = store.get_many([*waiting, dead])
    assert all(r.enqueued_at is not None for r in records.values())
    assert records[dead].status == SubmissionStatus.RUNNING  # enqueued, still claimable (the grader claims)
    # once: the next sweeps are the usual ones, and a second worker's pass finds everything held
    assert sweeper.sweep() == 0 and not sweeper.recovering
    assert queue.sweeper(store).sweep(everything=True) == 0
    assert len(queue.put) == 6 and len(queue.put_again) == 1


def test_the_pass_stops_at_the_newest_submission_it_saw_first(store: SubmissionStore) -> None:
    old = [store.create(problem="p", source=f"# {i}").id for i in range(3)]
    stored_meanwhile: list[str] = []

    class Racing(Queue):
        def held(self) -> set[str]:  # an API process stores (and enqueues) one while the pass reads the queue
            if not stored_meanwhile:
                stored_meanwhile.append(store.create(problem="p", source="# new").id)
            return super().held()

    queue = Racing()
    assert queue.sweeper(store, batch_size=1).sweep(everything=True) == 3
    assert queue.put == old and stored_meanwhile and stored_meanwhile[0] not in queue.put


def test_a_start_up_pass_that_met_an_outage_is_done_at_the_next_sweep(store: SubmissionStore) -> None:
    lost = store.create(problem="p", source="# lost").id
    queue, calls = Queue(), []

    def restarted() -> bool:  # Redis away at start, then back (its run id remembered: not a restart)
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("redis is away")
        return False

    sweeper = queue.sweeper(store, queue_restarted=restarted)
    sweeper.recovering = True
    with pytest.raises(ConnectionError):
        sweeper.sweep()
    assert sweeper.recovering and queue.put == []
    assert sweeper.sweep() == 1 and queue.put == [lost] and not sweeper.recovering


def test_start_with_recover_runs_the_pass_at_once(store: SubmissionStore) -> None:
    lost = store.create(problem="p", source="# lost").id
    store.mark_enqueued(lost)
    queue = Queue()
    sweeper = queue.sweeper(store)  # interval 60 s: only the start-up pass can enqueue it in time
    sweeper.start(recover=True)
    try:
        assert queue.changed.wait(DEADLINE_S), "the start-up pass did not run"
    finally:
        sweeper.stop()
    assert queue.put == [lost]
