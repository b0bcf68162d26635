"""The judge's processes across outages, on real PostgreSQL and redis-server: a server or worker
starting while PostgreSQL is down waits for it and says so once (then once more when it answers);
after a Redis restart, the sweeper re-enqueues only the submissions whose messages Redis lost."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from server.grading.redis_jobs import RedisJobs
from server.grading.sweeper import Sweeper
from server.store import migrate
from server.store.db import make_engine
from server.store.faults import wait_for_database
from server.store.submissions import SubmissionStore


def test_waiting_for_a_database_that_is_down_says_so_once_and_returns_when_it_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.services import PostgresServer, _postgres_bin_dir, _unavailable

    bin_dir = _postgres_bin_dir()
    if isinstance(bin_dir, str):
        _unavailable(bin_dir)
    postgres = PostgresServer(bin_dir).start()  # type: ignore[arg-type]
    try:
        url = postgres.url_for("waiting")
        postgres.down()
        waited: list[float] = []
        caplog.set_level(logging.WARNING, logger="remat_judge.database")
        waiter = threading.Thread(target=lambda: waited.append(wait_for_database(url, max_delay_s=0.5)))
        waiter.start()
        time.sleep(3)
        assert waiter.is_alive() and not waited  # still waiting, not exited
        postgres.start()
        waiter.join(30)
        assert waited and waited[0] >= 3
        lines = [r.getMessage() for r in caplog.records if r.name == "remat_judge.database"]
        assert len(lines) == 2, lines  # one when it starts waiting, one when the database answers
        assert (
            lines[0].startswith(f"waiting for the database at 127.0.0.1:{postgres.port}/") and "remat@" not in lines[0]
        )
        assert "answers, after" in lines[1]
        stop = threading.Event()
        postgres.down()
        stop.set()
        with pytest.raises(InterruptedError):  # a worker told to stop while waiting stops
            wait_for_database(url, stop=stop)
    finally:
        postgres.stop()


def test_after_a_redis_restart_only_what_redis_lost_is_enqueued_again(tmp_path: Path, redis_url: str) -> None:
    url = f"sqlite:///{tmp_path / 'judge.db'}"
    migrate.upgrade(url)
    store = SubmissionStore(make_engine(url))
    jobs = RedisJobs(redis_url)
    try:
        kept = [store.create(problem="p", source=f"# {i}").id for i in range(3)]
        lost = store.create(problem="p", source="# lost").id
        for submission_id in kept:  # their messages are in Redis
            jobs.put(submission_id)
            store.mark_enqueued(submission_id)
        store.mark_enqueued(lost)  # recorded as enqueued, but its message is gone (what a Redis restart does)
        assert jobs.held() == set(kept)
        put: list[str] = []

        def enqueue(submission_id: str) -> None:
            put.append(submission_id)
            jobs.put(submission_id)

        sweeper = Sweeper(store, enqueue, interval_s=1, held=jobs.held)
        assert sweeper.sweep(everything=True) == 1 and put == [lost]
        assert jobs.held() == {*kept, lost}
        assert sweeper.sweep(everything=True) == 0  # a second worker's sweeper: nothing twice
    finally:
        jobs.close()
