"""The distributed mode end to end: real PostgreSQL, real redis-server, one `remat-judge serve`
process and two `remat-judge worker` processes, all on loopback, driven over HTTP.

What must hold: every accepted submission is graded and stored once; a worker killed
mid-job has its job graded by the other; a Redis outage answers 503 and loses nothing; an API
restart mid-burst loses nothing."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from graders.pipeline import JudgeConfig
from tests.support import PROBLEMS, TEST_SEED, Server, Worker, remat_judge

pytestmark = [pytest.mark.e2e, pytest.mark.jail]
DOT = PROBLEMS / "checkpoint_dot_policy"
EXPECT = re.compile(r"^# expect:\s*([A-Z_]+)", re.MULTILINE)
SLOW = "import time\ntime.sleep(3)\n"  # a correct submission that takes a while to trace


class Deployment:
    def __init__(self, root: Path, database_url: str, redis: object):
        self.root, self.database_url, self.redis = root, database_url, redis
        self.env = {
            "REMAT_JUDGE_DATABASE_URL": database_url,
            "REMAT_JUDGE_REDIS_URL": redis.url,  # type: ignore[attr-defined]
            "REMAT_JUDGE_HIDDEN_SEED": TEST_SEED,
            "REMAT_JUDGE_RATE_LIMIT": "",
            "REMAT_JUDGE_WAIT_TIMEOUT_S": "120",
            # short timings, so the failure cases below take seconds
            "REMAT_JUDGE_HEARTBEAT_TIMEOUT_S": "6",
            "REMAT_JUDGE_LEASE_S": "6",
            "REMAT_JUDGE_SWEEP_INTERVAL_S": "1",
            "REMAT_JUDGE_LOG_FORMAT": "json",
            "REMAT_JUDGE_METRICS_TOKEN": "scrape-token",
        }
        self.api: Server | None = None
        self.workers: list[Worker] = []

    def start(self) -> Deployment:
        done = remat_judge("db", "upgrade", env={**__import__("os").environ, **self.env})
        assert done.returncode == 0, done.stdout + done.stderr
        self.api = Server(self.root / "api", env=self.env).start()
        self.workers = [Worker(self.root / "worker-data", self.env, name=f"worker{i}").start() for i in range(2)]
        return self

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.api is not None and self.api.proc is not None and self.api.proc.poll() is None:
            self.api.stop()

    def rows(self) -> list[tuple[str, str, str | None, int, str | None]]:
        engine = create_engine(self.database_url.replace("postgresql://", "postgresql+psycopg://"))
        with engine.connect() as c:
            rows = c.execute(text("SELECT id, status, verdict, attempts, worker_id FROM submissions")).all()
        engine.dispose()
        return [tuple(r) for r in rows]

    def graded_log_lines(self) -> Counter[str]:
        """How many times each submission id was reported graded, over every worker's log."""
        counts: Counter[str] = Counter()
        for worker in self.workers:
            for match in re.finditer(r'"message": "graded ([0-9a-f]{32})', worker.log.read_text()):
                counts[match.group(1)] += 1
        return counts


@pytest.fixture
def deployment(tmp_path: Path, postgres_url: str, redis_factory, judge_config: JudgeConfig) -> Iterator[Deployment]:
    redis = redis_factory()
    dep = Deployment(tmp_path, postgres_url, redis).start()
    yield dep
    dep.stop()


def _post(client: httpx.Client, source: str, *, wait: bool = False) -> httpx.Response:
    return client.post(
        "/api/v1/submissions",
        params={"wait": str(wait).lower()},
        json={"problem": "checkpoint_dot_policy", "source": source},
    )


def _wait_all(client: httpx.Client, ids: list[str], timeout_s: float) -> dict[str, dict]:
    deadline, done = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline and len(done) < len(ids):
        for submission_id in ids:
            if submission_id not in done:
                body = client.get(f"/api/v1/submissions/{submission_id}").json()
                if body["status"] in ("done", "failed"):
                    done[submission_id] = body
        time.sleep(0.5)
    return done


def _bank() -> list[tuple[str, str]]:
    """(source, expected verdict) for the reference, right/ and the quick wrong/ files."""
    files = [DOT / "reference.py", *sorted((DOT / "right").glob("*.py")), *sorted((DOT / "wrong").glob("*.py"))]
    out = []
    for path in files:
        source = path.read_text()
        found = EXPECT.search(source)
        expected = found.group(1) if found else "ACCEPTED"
        if (
            expected in ("TIME_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "OUTPUT_LIMIT_EXCEEDED")
            or path.name == "forged_bundle.py"
        ):
            continue
        out.append((source, expected))
    return out


def test_a_burst_of_submissions_is_each_graded_and_stored_once(deployment: Deployment) -> None:
    """Every file of the bank twice (the second time a line lower, so the result cache does not
    answer it), one in ten with `wait=true`: bounded for CI (`bench/throughput.py --url` bursts
    the whole bank, every problem's files at once, at a running deployment)."""
    bank = _bank()
    burst = 2 * len(bank)
    posted: dict[str, str] = {}
    assert deployment.api is not None
    with deployment.api.client() as client:
        for i in range(burst):
            source, expected = bank[i % len(bank)]
            response = _post(client, "\n" * (i // len(bank)) + source, wait=(i % 10 == 0))
            assert response.status_code in (200, 202), response.text
            posted[response.json()["id"]] = expected
        done = _wait_all(client, list(posted), timeout_s=600)
        assert client.get("/metrics").status_code == 401  # the API's port serves metrics to the token only
        metrics = client.get("/metrics", headers={"Authorization": "Bearer scrape-token"}).text
    assert len(done) == burst
    wrong = {i: (posted[i], b["verdict"]) for i, b in done.items() if b["verdict"] != posted[i]}
    assert wrong == {}
    rows = deployment.rows()
    assert len(rows) == burst and {r[1] for r in rows} == {"done"}
    assert deployment.graded_log_lines() == Counter({i: 1 for i in posted})
    assert "remat_judge_queue_depth 0.0" in metrics
    graded = sum(
        float(m)
        for w in deployment.workers
        for m in re.findall(r"^remat_judge_verdicts_total\{[^}]*\} (\S+)$", w.metrics(), re.MULTILINE)
    )
    assert graded == burst


def test_a_killed_worker_s_job_is_graded_by_the_other(deployment: Deployment) -> None:
    assert deployment.api is not None
    with deployment.api.client() as client:
        submission_id = _post(client, SLOW + (DOT / "reference.py").read_text()).json()["id"]
        deadline = time.monotonic() + 60
        holder = None
        while holder is None and time.monotonic() < deadline:
            holder = next((r[4] for r in deployment.rows() if r[0] == submission_id and r[1] == "running"), None)
            time.sleep(0.1)
        assert holder is not None, "no worker claimed the job"
        victim = next(w for w in deployment.workers if w.proc is not None and f"-{w.proc.pid}-" in holder)
        killed_at = time.monotonic()
        victim.stop(signal.SIGKILL)
        done = _wait_all(client, [submission_id], timeout_s=120)
        redelivered_after = time.monotonic() - killed_at
    assert done[submission_id]["verdict"] == "ACCEPTED"
    row = next(r for r in deployment.rows() if r[0] == submission_id)
    assert row[1] == "done" and row[3] == 2 and row[4] != holder
    survivor = next(w for w in deployment.workers if w is not victim)
    assert "graded " + submission_id in survivor.log.read_text()
    print(f"graded by the other worker {redelivered_after:.1f} s after the kill (lease 6 s, 3 s of tracing)")


def test_a_redis_outage_answers_503_and_loses_nothing(deployment: Deployment) -> None:
    assert deployment.api is not None
    reference = (DOT / "reference.py").read_text()
    with deployment.api.client() as client:
        accepted = [_post(client, "\n" * i + SLOW + reference).json()["id"] for i in range(4)]
        deployment.redis.stop()  # type: ignore[attr-defined]
        refused = _post(client, reference)
        assert refused.status_code == 503, refused.text
        assert "unavailable" in refused.json()["detail"] and int(refused.headers["retry-after"]) > 0
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["redis"] == "unavailable"
        assert client.get("/healthz").status_code == 200
        deployment.redis.start()  # type: ignore[attr-defined]
        later = _post(client, "\n" * 9 + reference)
        assert later.status_code == 202, later.text
        ids = accepted + [later.json()["id"]]
        done = _wait_all(client, ids, timeout_s=180)
    assert {i: b["verdict"] for i, b in done.items()} == {i: "ACCEPTED" for i in ids}
    assert len(deployment.rows()) == 5  # the refused submission was not stored


def test_an_api_restart_mid_burst_loses_nothing(deployment: Deployment) -> None:
    assert deployment.api is not None
    reference = (DOT / "reference.py").read_text()
    with deployment.api.client() as client:
        ids = [_post(client, "\n" * i + reference).json()["id"] for i in range(12)]
    deployment.api.stop(signal.SIGKILL)
    deployment.api = Server(deployment.root / "api2", env=deployment.env).start()
    with deployment.api.client() as client:
        ids += [_post(client, "\n" * (20 + i) + reference).json()["id"] for i in range(4)]
        done = _wait_all(client, ids, timeout_s=240)
    assert len(done) == 16 and {b["verdict"] for b in done.values()} == {"ACCEPTED"}
    assert deployment.graded_log_lines() == Counter({i: 1 for i in ids})
