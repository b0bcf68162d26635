"""Load on a whole deployment: nothing lost, nothing graded twice, no server error.

Numbers are printed; nothing is asserted (this is not a test).

    .venv/bin/python bench/load.py --submissions 500            # embedded: one `serve` process
    .venv/bin/python bench/load.py --submissions 500 --scaled   # PostgreSQL + Redis + 1 API + 2 workers

It starts the deployment itself on loopback ports with a fresh temporary folder (the scaled
one with its own PostgreSQL and redis-server, started like the tests start them: `tests/services.py`),
warms the problem's reference cache, then `--clients` threads send the submissions in bursts of
`--burst` (a mix of `checkpoint_dot_policy`'s reference, right/ and quick wrong/ files, each made a
distinct program by leading blank lines; every `--wait-every`-th with `wait=true`), and polls until
every accepted submission has its verdict (or `--timeout-s` passes). Admission control is off
(no rate limit, no queue cap): the point is what the judge does with everything it accepts.

Printed, last line first in importance:
  load: N submitted, G graded, L lost, D duplicated, E server errors, X verdicts/s, p50 A s, p95 B s, p99 C s
where
  submitted   POSTs answered 200/202 (each stored one submission);
  graded      of those, how many have a verdict in the end;
  lost        submitted - graded (still queued or running at the timeout, or vanished);
  duplicated  submissions whose verdict was stored more than once (counted from the "graded <id>"
              lines of every grading process's JSON log, which are written only after a verdict
              is stored);
  server errors  HTTP 5xx answers and connection failures (a 503 with Retry-After included);
  verdicts/s  graded / wall time from the first POST to the last verdict;
  pA          POST-to-verdict latency percentiles (nearest rank), as the clients saw them.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from common import bank, scratch_dir

from tests.support import Server, Worker, remat_judge


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


class Deployment:
    """The judge under test: embedded (`serve` grading in-process) or scaled."""

    def __init__(self, root: Path, *, scaled: bool, workers: int):
        self.root, self.scaled, self.workers_n = root, scaled, workers
        self.api: Server | None = None
        self.workers: list[Worker] = []
        self._services: list[object] = []
        self.env = {
            "REMAT_JUDGE_HIDDEN_SEED": "load-seed",
            "REMAT_JUDGE_RATE_LIMIT": "",
            "REMAT_JUDGE_MAX_QUEUE_DEPTH": "0",
            "REMAT_JUDGE_WAIT_TIMEOUT_S": "600",
            "REMAT_JUDGE_LOG_FORMAT": "json",
        }

    def start(self) -> Deployment:
        if self.scaled:
            from tests.services import PostgresServer, RedisServer, _postgres_bin_dir, find_binary

            bin_dir, redis_binary = _postgres_bin_dir(), find_binary("redis-server")
            if isinstance(bin_dir, str) or redis_binary is None:
                missing = bin_dir if isinstance(bin_dir, str) else "no redis-server"
                raise RuntimeError(f"--scaled needs PostgreSQL and redis-server: {missing}")
            postgres = PostgresServer(bin_dir).start()
            (self.root / "redis").mkdir()
            redis = RedisServer(redis_binary, self.root / "redis").start()
            self._services = [redis, postgres]
            self.env.update({"REMAT_JUDGE_DATABASE_URL": postgres.url_for("judge"), "REMAT_JUDGE_REDIS_URL": redis.url})
            done = remat_judge("db", "upgrade", env={**os.environ, **self.env})
            if done.returncode != 0:
                raise RuntimeError(done.stdout + done.stderr)
            self.api = Server(self.root / "api", env=self.env).start()
            self.workers = [
                Worker(self.root / "worker-data", self.env, name=f"worker{i}").start() for i in range(self.workers_n)
            ]
        else:
            self.api = Server(self.root / "data", workers=self.workers_n, env=self.env).start()
        return self

    def logs(self) -> list[Path]:
        return [w.log for w in self.workers] + ([self.api.log] if self.api else [])

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.api is not None:
            self.api.stop()
        for service in self._services:
            service.stop()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=500)
    parser.add_argument("--scaled", action="store_true", help="PostgreSQL + Redis + 1 API + 2 workers")
    parser.add_argument("--workers", type=int, default=2, help="grading threads (embedded) or worker processes")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--burst", type=int, default=25, help="submissions a client sends at once")
    parser.add_argument("--pause-s", type=float, default=2.0, help="between a client's bursts")
    parser.add_argument("--wait-every", type=int, default=5, help="every n-th submission uses wait=true")
    parser.add_argument("--timeout-s", type=float, default=3600)
    args = parser.parse_args()

    with scratch_dir("remat-load-") as root:
        dep = Deployment(root, scaled=args.scaled, workers=args.workers)
        sources = [source for _, source in bank("checkpoint_dot_policy")]
        try:
            dep.start()
            assert dep.api is not None
            shape = (
                f"scaled (PostgreSQL, Redis, 1 API, {args.workers} workers)"
                if args.scaled
                else f"embedded ({args.workers} grading threads)"
            )
            print(f"deployment: {shape}; data in {root}")
            with httpx.Client(base_url=dep.api.url, timeout=600) as client:  # warm the reference cache
                client.post(
                    "/api/v1/submissions",
                    params={"wait": "true"},
                    json={"problem": "checkpoint_dot_policy", "source": sources[0]},
                )
            posted: dict[str, float] = {}  # id -> POST time
            finished: dict[str, float] = {}  # id -> when its verdict was seen
            errors: Counter[str] = Counter()
            lock = threading.Lock()
            counter = iter(range(args.submissions))
            t_start = time.monotonic()

            def client_loop() -> None:
                with httpx.Client(base_url=dep.api.url, timeout=900) as client:  # type: ignore[union-attr]
                    done = False
                    while not done:
                        for _ in range(args.burst):
                            try:
                                i = next(counter)
                            except StopIteration:
                                done = True
                                break
                            source = "\n" * (1 + i // len(sources)) + sources[i % len(sources)]
                            wait = args.wait_every > 0 and i % args.wait_every == 0
                            t = time.monotonic()
                            try:
                                r = client.post(
                                    "/api/v1/submissions",
                                    params={"wait": str(wait).lower()},
                                    json={"problem": "checkpoint_dot_policy", "source": source},
                                )
                            except httpx.HTTPError as exc:
                                with lock:
                                    errors[f"connection: {type(exc).__name__}"] += 1
                                continue
                            if r.status_code >= 500:
                                with lock:
                                    errors[f"HTTP {r.status_code}"] += 1
                                continue
                            if r.status_code not in (200, 202):
                                with lock:
                                    errors[f"HTTP {r.status_code} (refused)"] += 1
                                continue
                            body = r.json()
                            with lock:
                                posted[body["id"]] = t
                                if body["status"] in ("done", "failed"):
                                    finished[body["id"]] = time.monotonic()
                        time.sleep(args.pause_s)

            threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + args.timeout_s
            with httpx.Client(base_url=dep.api.url, timeout=60) as poller:
                while time.monotonic() < deadline:
                    with lock:
                        pending = [i for i in posted if i not in finished]
                        all_posted = not any(t.is_alive() for t in threads)
                    for submission_id in pending:
                        try:
                            status = poller.get(f"/api/v1/submissions/{submission_id}").json()["status"]
                        except (httpx.HTTPError, KeyError, ValueError):
                            errors["poll failure"] += 1
                            continue
                        if status in ("done", "failed"):
                            with lock:
                                finished.setdefault(submission_id, time.monotonic())
                    if all_posted and len(finished) == len(posted):
                        break
                    time.sleep(0.5)
            for thread in threads:
                thread.join()
            wall = max(finished.values(), default=t_start) - t_start
            graded_lines: Counter[str] = Counter()
            for log in dep.logs():
                for match in re.finditer(r'"message": "graded ([0-9a-f]{32})', log.read_text(errors="replace")):
                    graded_lines[match.group(1)] += 1
            latencies = [finished[i] - posted[i] for i in finished]
            n, g = len(posted), len(finished)
            duplicated = sum(1 for i in posted if graded_lines[i] > 1)
            server_errors = sum(v for k, v in errors.items() if "refused" not in k)
            if errors:
                print("errors:", dict(errors))
            print(
                f"load: {n} submitted, {g} graded, {n - g} lost, {duplicated} duplicated, "
                f"{server_errors} server errors, "
                f"{g / wall if wall > 0 else float('nan'):.2f} verdicts/s, p50 {percentile(latencies, 0.5):.1f} s, "
                f"p95 {percentile(latencies, 0.95):.1f} s, p99 {percentile(latencies, 0.99):.1f} s"
            )
        finally:
            dep.stop()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    main()
