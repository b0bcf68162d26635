"""Exactly-once grading in the database (server/store/db.py `claim`, `finish`, `to_enqueue`), on real
SQLite and real PostgreSQL, migrated by the real migration chain."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from server.store import migrate
from server.store.db import make_engine
from server.store.submissions import SubmissionStatus, SubmissionStore


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SubmissionStore:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'judge.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    migrate.upgrade(url)
    engine = make_engine(url)
    yield SubmissionStore(engine)
    engine.dispose()


def _finish(store: SubmissionStore, submission_id: str, worker_id: str) -> bool:
    return store.finish(
        submission_id, verdict="ACCEPTED", score=1.0, problem_version="v", result_json="{}", worker_id=worker_id
    )


def test_a_job_delivered_twice_is_claimed_once(store: SubmissionStore) -> None:
    record = store.create(problem="p", source="x")
    first = store.claim(record.id, worker_id="w1", lease_s=30, max_attempts=3)
    second = store.claim(record.id, worker_id="w2", lease_s=30, max_attempts=3)
    assert first.record is not None and first.record.attempts == 1 and first.record.status == SubmissionStatus.RUNNING
    assert second.record is None and second.reason == "held"
    assert not _finish(store, record.id, "w2"), "a worker without the claim stored a verdict"
    assert _finish(store, record.id, "w1")
    assert store.claim(record.id, worker_id="w2", lease_s=30, max_attempts=3).reason == "finished"
    assert store.get(record.id).status == SubmissionStatus.DONE
    assert store.claim("0" * 32, worker_id="w1", lease_s=30, max_attempts=3).reason == "unknown"


def test_concurrent_claims_have_one_winner(store: SubmissionStore) -> None:
    record = store.create(problem="p", source="x")
    results: list[str] = []
    barrier = threading.Barrier(8)

    def claim(i: int) -> None:
        barrier.wait()
        got = store.claim(record.id, worker_id=f"w{i}", lease_s=30, max_attempts=3)
        results.append("won" if got.record is not None else got.reason)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("won") == 1 and results.count("held") == 7
    assert store.get(record.id).attempts == 1


def test_an_expired_claim_is_taken_over_and_the_old_worker_stores_nothing(store: SubmissionStore) -> None:
    record = store.create(problem="p", source="x")
    store.mark_enqueued(record.id)
    assert store.claim(record.id, worker_id="dead", lease_s=0.2, max_attempts=3).record is not None
    assert store.to_enqueue() == []  # the lease is live: nobody re-enqueues it
    time.sleep(0.4)
    assert store.to_enqueue() == [record.id]  # expired: the sweeper re-enqueues it, once
    store.mark_enqueued(record.id)
    assert store.to_enqueue() == []
    taken = store.claim(record.id, worker_id="alive", lease_s=30, max_attempts=3)
    assert taken.record is not None and taken.record.attempts == 2
    assert not _finish(store, record.id, "dead")
    assert _finish(store, record.id, "alive")


def test_renewed_leases_are_not_taken_over(store: SubmissionStore) -> None:
    record = store.create(problem="p", source="x")
    store.claim(record.id, worker_id="w1", lease_s=0.5, max_attempts=3)
    for _ in range(4):
        time.sleep(0.2)
        assert store.renew_leases([record.id], worker_id="w1", lease_s=0.5) == 1
        assert store.claim(record.id, worker_id="w2", lease_s=30, max_attempts=3).reason == "held"
    assert store.renew_leases([record.id], worker_id="w2", lease_s=0.5) == 0


def test_attempts_are_bounded_then_the_submission_fails(store: SubmissionStore) -> None:
    record = store.create(problem="p", source="x")
    for attempt in (1, 2):
        claim = store.claim(record.id, worker_id=f"w{attempt}", lease_s=0.05, max_attempts=2)
        assert claim.record is not None and claim.record.attempts == attempt
        time.sleep(0.1)  # the worker "dies": its lease runs out
    last = store.claim(record.id, worker_id="w3", lease_s=30, max_attempts=2)
    assert last.record is None and last.reason == "exhausted"
    assert store.finish(
        record.id,
        verdict="INTERNAL_ERROR",
        score=0.0,
        problem_version=None,
        result_json="{}",
        worker_id="w3",
        status=SubmissionStatus.FAILED,
    )
    got = store.get(record.id)
    assert got.status == SubmissionStatus.FAILED and got.verdict == "INTERNAL_ERROR" and got.attempts == 2
    assert store.finished_among([record.id]) == {record.id}
    assert store.to_enqueue() == [] and store.unfinished() == []


def test_jobs_the_queue_never_took_are_swept(store: SubmissionStore) -> None:
    taken = store.create(problem="p", source="x")
    store.mark_enqueued(taken.id)
    lost = store.create(problem="p", source="y")
    assert store.to_enqueue(older_than_s=60) == []  # too recent: its POST may still be enqueueing it
    assert store.to_enqueue(older_than_s=0) == [lost.id]
    assert store.queue_depth() == 2


def test_a_submission_that_kills_its_worker_every_time_ends_failed(store: SubmissionStore, tmp_path: Path) -> None:
    """Each start of the embedded server releases what was running (its worker died with the old
    process) and grades it again; the attempts are counted, and past the cap the submission ends
    "failed" with INTERNAL_ERROR instead of being retried on every restart."""
    import json

    from graders.problems.problem import ProblemRepository
    from server.grading.grader import Grader
    from tests.support import PROBLEMS

    record = store.create(problem="checkpoint_dot_policy", source="x")
    for _ in range(3):  # three processes died while grading it
        assert store.claim(record.id, worker_id="doomed", lease_s=600, max_attempts=3).record is not None
        store.release_all()
    announced: list[str] = []
    grader = Grader(
        store=store,
        problems=ProblemRepository(PROBLEMS),
        config_factory=lambda: None,  # type: ignore[arg-type,return-value]
        worker_id="next",
        lease_s=30,
        max_attempts=3,
        on_finished=announced.append,
    )
    assert grader.grade(record.id) == "failed"
    got = store.get(record.id)
    assert got.status == SubmissionStatus.FAILED and got.verdict == "INTERNAL_ERROR" and got.attempts == 3
    report = json.loads(got.result_json)
    assert report["status"] == "failed" and report["verdict"] == "INTERNAL_ERROR"
    assert "not your fault" in report["checks"][0]["message"]
    assert announced == [record.id]
    assert grader.grade(record.id) == "finished"  # a late duplicate delivery changes nothing
