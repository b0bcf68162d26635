"""Redis restarting empty while no worker runs (the distributed mode, end to end): real
PostgreSQL, real redis-server processes, a `remat-judge serve` process and two `remat-judge
worker` processes, all on loopback.

Submissions are stored and enqueued while no worker runs; Redis stops and a new redis-server
without persistence takes its port, so their messages are gone and the workers never saw the old
server's run id. What must hold: the workers' start-up pass (server/grading/sweeper.py
`Sweeper.start(recover=True)`) enqueues them again at once, long before the 10-minute stale sweep,
and every submission, those lost and one the API enqueued on the new server, is graded exactly
once although both workers start together and run the pass."""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from graders.config import JudgeConfig
from server.grading.redis_jobs import RedisJobs
from tests.services import RedisServer
from tests.support import PROBLEMS, TEST_SEED, Server, Worker, remat_judge

pytestmark = [pytest.mark.e2e, pytest.mark.jail]
REFERENCE = (PROBLEMS / "checkpoint_dot_policy" / "reference.py").read_text()  # ACCEPTED in about a second
LOST = 4  # submissions whose messages the restart loses
GRADED_WITHIN_S = 120.0  # a bound for the test; the stale sweep would take 600 s
PASS = re.compile(r'"message": "re-enqueued (\d+) submissions \(this worker started\)')
GRADED = re.compile(r'"message": "graded ([0-9a-f]{32})')


def _env(database_url: str, redis: RedisServer) -> dict[str, str]:
    return {
        "REMAT_JUDGE_DATABASE_URL": database_url,
        "REMAT_JUDGE_REDIS_URL": redis.url,
        "REMAT_JUDGE_HIDDEN_SEED": TEST_SEED,
        "REMAT_JUDGE_RATE_LIMIT": "",
        "REMAT_JUDGE_HEARTBEAT_TIMEOUT_S": "6",
        "REMAT_JUDGE_LEASE_S": "6",
        "REMAT_JUDGE_SWEEP_INTERVAL_S": "1",
        "REMAT_JUDGE_LOG_FORMAT": "json",
    }


def _submit(client: httpx.Client, copy: int) -> str:
    """Stores and enqueues one correct submission (a distinct source per `copy`); its id."""
    response = client.post(
        "/api/v1/submissions",
        params={"wait": "false"},
        json={"problem": "checkpoint_dot_policy", "source": "\n" * copy + REFERENCE},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _rows(database_url: str) -> dict[str, tuple[str, str | None, int]]:
    """id -> (status, verdict, attempts) of every stored submission."""
    engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as c:
            rows = c.execute(text("SELECT id, status, verdict, attempts FROM submissions")).all()
    finally:
        engine.dispose()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _held(redis: RedisServer) -> set[str]:
    """The submission ids whose messages the redis-server holds now (a fresh connection)."""
    jobs = RedisJobs(redis.url)
    try:
        return jobs.held()
    finally:
        jobs.close()


def test_submissions_lost_by_a_redis_restart_before_any_worker_runs_are_graded_once_at_start(
    tmp_path: Path, postgres_url: str, redis_factory, judge_config: JudgeConfig
) -> None:
    redis: RedisServer = redis_factory()
    env = _env(postgres_url, redis)
    done = remat_judge("db", "upgrade", env={**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr
    api = Server(tmp_path / "api", env=env).start()
    workers = [Worker(tmp_path / "workers", env, name=f"worker{i}") for i in range(2)]
    try:
        with api.client() as client:
            lost = [_submit(client, i) for i in range(LOST)]
            assert _held(redis) == set(lost)  # enqueued, and no worker takes them
            redis.stop()
            redis.start()  # a new process on the same port, without persistence: empty
            assert _held(redis) == set()
            later = _submit(client, LOST)  # the API enqueues on the new server
            assert _held(redis) == {later}
        ids = {*lost, later}
        started_at = time.monotonic()
        starts = [threading.Thread(target=w.start) for w in workers]  # together: both run the pass at once
        for t in starts:
            t.start()
        for t in starts:
            t.join()
        assert all(w.proc is not None and w.proc.poll() is None for w in workers), "a worker did not start"
        deadline = started_at + GRADED_WITHIN_S
        rows = _rows(postgres_url)
        while time.monotonic() < deadline and any(rows[i][0] in ("queued", "running") for i in ids):
            time.sleep(0.2)
            rows = _rows(postgres_url)
        graded_after_s = time.monotonic() - started_at
    finally:
        for w in workers:
            if w.proc is not None:
                w.stop()
        api.stop()
    assert rows == {i: ("done", "ACCEPTED", 1) for i in ids}, f"not all graded once in {GRADED_WITHIN_S:.0f} s"
    logs = [w.log.read_text() for w in workers]
    graded = Counter(m for log in logs for m in GRADED.findall(log))
    assert graded == Counter({i: 1 for i in ids})  # one grading each, over both workers
    passes = [[int(n) for n in PASS.findall(log)] for log in logs]
    assert all(len(p) == 1 for p in passes), passes  # each worker ran the start-up pass once
    assert sum(p[0] for p in passes) >= LOST  # between them they enqueued every lost one again
    print(f"{len(ids)} graded once each {graded_after_s:.1f} s after the workers were started; passes: {passes}")
