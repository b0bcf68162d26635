"""A chaos run of the distributed mode, shared by the bounded e2e test (`tests/e2e/test_chaos.py`)
and the full benchmark (`bench/chaos.py`): real PostgreSQL and redis-server of their own, one API
process and two workers, clients that retry like a careful LMS plug-in, and faults at set times.

A client sends each of its submissions until it gets an answer that is not a server fault: it
retries 5xx answers and connection failures (after `Retry-After`, at most 5 s, else 1 s) with the
same `Idempotency-Key` and the same `external_id` (the submission's logical name), and gives up
on a 4xx. Then every accepted submission is polled until it has a verdict.

Counted (`ChaosReport`): logical submissions sent, accepted (a 2xx in the end), graded, lost
(accepted without a verdict at the end), duplicated (logical submissions with more than one stored
row: found by `external_id`), wrong verdicts, every HTTP status seen (500s apart), rows graded
more than once (attempts > 1), and tracebacks in each process's log.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import PROBLEMS, TEST_SEED, Server, Worker, remat_judge

DOT = PROBLEMS / "checkpoint_dot_policy"
EXPECT = re.compile(r"^# expect:\s*([A-Z_]+)", re.MULTILINE)
BOMBS = ("TIME_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "OUTPUT_LIMIT_EXCEEDED")


def bank() -> list[tuple[str, str]]:
    """(source, expected verdict): `checkpoint_dot_policy`'s reference, right/ and quick wrong/ files."""
    out = []
    for path in [DOT / "reference.py", *sorted((DOT / "right").glob("*.py")), *sorted((DOT / "wrong").glob("*.py"))]:
        source = path.read_text()
        found = EXPECT.search(source)
        expected = found.group(1) if found else "ACCEPTED"
        if expected in BOMBS or path.name == "forged_bundle.py":
            continue
        out.append((source, expected))
    return out


@dataclass
class ChaosReport:
    """What a chaos run saw (see the module docstring)."""

    sent: int = 0
    accepted: int = 0
    graded: int = 0
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    regraded: int = 0
    internal_errors: int = 0
    tracebacks: dict[str, int] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    took_s: float = 0.0

    @property
    def server_errors(self) -> int:
        """5xx answers other than 503 (a 503 with Retry-After is the promised answer to an outage)."""
        return sum(n for s, n in self.statuses.items() if s.startswith("5") and s != "503")

    def line(self) -> str:
        seen = ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses.items()))
        return (
            f"chaos: {self.sent} sent, {self.accepted} accepted, {self.graded} graded, {self.lost} lost, "
            f"{self.duplicated} duplicated, {self.wrong} wrong verdicts, {self.server_errors} 5xx other than "
            f"503, {self.regraded} graded more than once, {self.internal_errors} INTERNAL_ERROR; "
            f"answers {{{seen}}}; tracebacks {self.tracebacks}; {self.took_s:.0f} s"
        )


class ChaosDeployment:
    """PostgreSQL, Redis, one API and two workers, each of its own, on loopback (short timings)."""

    def __init__(self, root: Path, *, workers: int = 2, env: dict[str, str] | None = None):
        from tests.services import PostgresServer, RedisServer, _postgres_bin_dir, find_binary

        bin_dir, redis_binary = _postgres_bin_dir(), find_binary("redis-server")
        if isinstance(bin_dir, str) or redis_binary is None:
            raise RuntimeError(
                f"needs PostgreSQL and redis-server: {bin_dir if isinstance(bin_dir, str) else 'no redis'}"
            )
        self.root, self.workers_n = root, workers
        self.postgres = PostgresServer(bin_dir)
        (root / "redis").mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer(redis_binary, root / "redis")
        self.env = {
            "REMAT_JUDGE_HIDDEN_SEED": TEST_SEED,
            "REMAT_JUDGE_RATE_LIMIT": "",
            "REMAT_JUDGE_MAX_QUEUE_DEPTH": "0",
            "REMAT_JUDGE_LOG_FORMAT": "json",
            "REMAT_JUDGE_HEARTBEAT_TIMEOUT_S": "6",
            "REMAT_JUDGE_LEASE_S": "6",
            "REMAT_JUDGE_SWEEP_INTERVAL_S": "1",
            **(env or {}),
        }
        self.api: Server | None = None
        self.workers: list[Worker] = []

    def start(self) -> ChaosDeployment:
        self.postgres.start()
        self.redis.start()
        self.database_url = self.postgres.url_for("chaos")
        self.env.update({"REMAT_JUDGE_DATABASE_URL": self.database_url, "REMAT_JUDGE_REDIS_URL": self.redis.url})
        done = remat_judge("db", "upgrade", env={**os.environ, **self.env})
        if done.returncode != 0:
            raise RuntimeError(done.stdout + done.stderr)
        self.api = Server(self.root / "api", env=self.env).start()
        self.workers = [
            Worker(self.root / "worker-data", self.env, name=f"worker{i}").start() for i in range(self.workers_n)
        ]
        return self

    def stop(self) -> None:
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                worker.stop()
        if self.api is not None and self.api.proc is not None and self.api.proc.poll() is None:
            self.api.stop()
        self.redis.stop()
        self.postgres.stop()

    # -- faults --------------------------------------------------------------------------------

    def postgres_restart(self) -> None:
        self.postgres.restart("fast")

    def postgres_down(self, hold_s: float) -> None:
        self.postgres.down("fast")
        time.sleep(hold_s)
        self.postgres.start()

    def redis_down(self, hold_s: float) -> None:
        self.redis.stop()
        time.sleep(hold_s)
        self.redis.start()

    def kill_worker(self, index: int = 0) -> None:
        worker = self.workers[index]
        worker.stop(signal.SIGKILL)
        worker.start()

    def kill_api(self) -> None:
        assert self.api is not None
        self.api.stop(signal.SIGKILL)
        self.api.start()

    def logs(self) -> dict[str, Path]:
        out = {f"worker{i}": w.log for i, w in enumerate(self.workers)}
        if self.api is not None:
            out["api"] = self.api.log
        return out

    def rows(self) -> list[tuple[str, str | None, str, str | None, int]]:
        """(id, external_id, status, verdict, attempts) of every stored submission."""
        import psycopg

        with psycopg.connect(self.database_url, connect_timeout=10) as connection:
            return [
                tuple(r)
                for r in connection.execute(  # type: ignore[misc]
                    "SELECT id, external_id, status, verdict, attempts FROM submissions"
                ).fetchall()
            ]


Fault = tuple[float, str, Callable[[], None]]  # (seconds after the start, name, action)


def run(
    deployment: ChaosDeployment,
    *,
    submissions: int,
    clients: int,
    spread_s: float,
    faults: list[Fault],
    timeout_s: float = 900,
    seed: int = 25,
) -> ChaosReport:
    """Sends `submissions` over about `spread_s` seconds from `clients` threads while `faults`
    happen, waits for every accepted one's verdict, and reports (`ChaosReport`)."""
    assert deployment.api is not None
    api_url = deployment.api.url
    sources = bank()
    rng = random.Random(seed)
    plan = [(f"chaos-{i:04d}", *sources[i % len(sources)]) for i in range(submissions)]
    rng.shuffle(plan)
    report = ChaosReport(sent=submissions)
    lock = threading.Lock()
    accepted: dict[str, str] = {}  # logical name -> expected verdict
    started = time.monotonic()

    def count(status: str) -> None:
        with lock:
            report.statuses[status] += 1

    def send(name: str, source: str, expected: str) -> None:
        key = str(uuid.uuid4())
        body = {"problem": "checkpoint_dot_policy", "source": f"# {name}\n" + source, "external_id": name}
        with httpx.Client(base_url=api_url, timeout=60) as client:
            while time.monotonic() - started < timeout_s:
                try:
                    answer = client.post("/api/v1/submissions", json=body, headers={"Idempotency-Key": key})
                except httpx.HTTPError:
                    count("connection error")
                    time.sleep(1)
                    continue
                count(str(answer.status_code))
                if answer.status_code in (200, 202):
                    with lock:
                        accepted[name] = expected
                    return
                if answer.status_code < 500 and answer.status_code not in (408, 429):
                    return  # refused for good
                retry = answer.headers.get("retry-after", "")
                time.sleep(min(5.0, float(retry)) if retry.isdigit() else 1.0)

    def client_loop(share: list[tuple[str, str, str]]) -> None:
        gap = spread_s / max(1, len(share))
        for name, source, expected in share:
            send(name, source, expected)
            time.sleep(gap * rng.uniform(0.5, 1.5))

    def fault_loop() -> None:
        for at_s, name, action in sorted(faults, key=lambda f: f[0]):
            time.sleep(max(0.0, at_s - (time.monotonic() - started)))
            began = time.monotonic() - started
            try:
                action()
                report.events.append(f"{began:.0f}-{time.monotonic() - started:.0f} s: {name}")
            except Exception as exc:  # noqa: BLE001 - said in the report
                report.events.append(f"{began:.0f} s: {name} failed: {exc!r}")

    threads = [threading.Thread(target=client_loop, args=(plan[i::clients],)) for i in range(clients)]
    chaos = threading.Thread(target=fault_loop)
    for thread in [*threads, chaos]:
        thread.start()
    for thread in [*threads, chaos]:
        thread.join()
    report.accepted = len(accepted)

    # every accepted submission's verdict, read back from the database (the source of truth)
    deadline = time.monotonic() + timeout_s
    rows = deployment.rows()
    while time.monotonic() < deadline:
        rows = deployment.rows()
        finished = {r[1] for r in rows if r[2] in ("done", "failed")}
        if set(accepted) <= finished:
            break
        time.sleep(1)
    report.took_s = time.monotonic() - started
    by_name: dict[str, list[tuple]] = {}
    for row in rows:
        by_name.setdefault(row[1] or "", []).append(row)
    report.duplicated = sum(1 for name, found in by_name.items() if name and len(found) > 1)
    finished_rows = {name: [r for r in found if r[2] in ("done", "failed")] for name, found in by_name.items()}
    report.graded = sum(1 for name in accepted if finished_rows.get(name))
    report.lost = report.accepted - report.graded
    report.wrong = sum(
        1 for name, expected in accepted.items() if finished_rows.get(name) and finished_rows[name][0][3] != expected
    )
    report.regraded = sum(1 for r in rows if r[4] > 1)
    report.internal_errors = sum(1 for r in rows if r[3] == "INTERNAL_ERROR")
    report.tracebacks = {
        who: path.read_text(errors="replace").count("Traceback")
        for who, path in deployment.logs().items()
        if path.exists()
    }
    return report
