"""A fresh server's first POST-to-verdict against the next ones, with and without the warm-up of
the expectations (`REMAT_JUDGE_WARM_EXPECTATIONS`, server/grading/warm_expectations.py).

Each mode starts `remat-judge serve` with bench/latency.py's `start_server` (a free loopback port,
a fresh data directory, so nothing is cached) over a problems folder holding only the problem,
published (the warm-up has one version to build), then posts the problem's reference with
`wait=true`: first once, then N more one at a time (each with other leading blank lines, so the
result cache answers none). Modes:

- `cold`: the warm-up off; the first submission is posted as soon as /healthz answers and builds
  the expectations itself (what every fresh server did before the warm-up);
- `at_once`: the warm-up on, the first posted as soon as /healthz answers: it waits for the build
  the warm-up has begun (the entry's lock) instead of starting its own;
- `warmed`: the warm-up on, the first posted once /readyz answers 200 (it answers 503, "warming",
  until the warm-up has gone through every served version: what a load balancer waits for).

Prints the first latency, the median of the next N and their ratio per mode. Target: the first
within 1.5x of the next ones once warmed.
Usage:
    .venv/bin/python bench/first_verdict.py [N] [--problem checkpoint_dot_policy] [--modes cold,at_once,warmed]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.latency import start_server  # noqa: E402
from graders.problems.publication import content_version, publish  # noqa: E402

MODES = ("cold", "at_once", "warmed")


def post(client: httpx.Client, problem: str, source: str) -> float:
    """Posts `source` with wait=true; the milliseconds until its verdict came back.

    Raises:
        RuntimeError: no verdict in the answer (a 202 past the wait, or an error).
    """
    t0 = time.perf_counter()
    r = client.post("/api/v1/submissions", params={"wait": "true"}, json={"problem": problem, "source": source})
    ms = (time.perf_counter() - t0) * 1000
    verdict = r.json().get("verdict") if r.status_code == 200 else None
    if verdict is None:
        raise RuntimeError(f"no verdict: HTTP {r.status_code} {r.text[:300]}")
    if os.environ.get("BENCH_VERBOSE"):
        print(f"    {ms:7.0f} ms: {r.json().get('timing_ms')}")
    return ms


def ready(url: str, deadline_s: float = 600.0) -> float:
    """Waits until the server's /readyz answers 200 (its warm-up done); the seconds that took.

    Raises:
        TimeoutError: not within `deadline_s`.
    """
    t0 = time.monotonic()
    with httpx.Client(base_url=url, timeout=10) as client:
        while time.monotonic() - t0 < deadline_s:
            if client.get("/readyz").status_code == 200:
                return time.monotonic() - t0
            time.sleep(0.1)
    raise TimeoutError(f"the server was not ready within {deadline_s:g} s")


def run_mode(mode: str, problem: str, n: int) -> dict[str, float]:
    """One fresh server in `mode`: the first latency, the next ones' median (ms) and their ratio."""
    with tempfile.TemporaryDirectory(prefix="bench-first-") as tmp:
        problems = Path(tmp) / "problems"
        shutil.copytree(REPO / "problems" / problem, problems / problem, ignore=shutil.ignore_patterns(".published"))
        publish(problems / problem, problems, content_version(problems / problem))
        os.environ["REMAT_JUDGE_PROBLEMS_DIR"] = str(problems)
        os.environ["REMAT_JUDGE_WARM_EXPECTATIONS"] = "false" if mode == "cold" else "true"
        data_dir = Path(tmp) / "data"
        t0 = time.monotonic()
        proc, url = start_server(data_dir)
        ready_s = time.monotonic() - t0
        source = (problems / problem / "reference.py").read_text()
        try:
            waited_s = ready(url) if mode == "warmed" else 0.0
            with httpx.Client(base_url=url, timeout=600) as client:
                first = post(client, problem, source)
                rest = [post(client, problem, "\n" * (i + 1) + source) for i in range(n)]
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    median = statistics.median(rest)
    print(
        f"{mode:8s} ready in {ready_s:5.1f} s, warm-up waited {waited_s:5.1f} s; first {first:7.0f} ms, "
        f"next {n}: median {median:5.0f} ms (min {min(rest):.0f}, max {max(rest):.0f}); "
        f"first/median {first / median:.2f}x"
    )
    return {"first_ms": first, "next_median_ms": median, "ratio": first / median, "ready_s": ready_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=5, help="submissions after the first, per mode")
    parser.add_argument("--problem", default="checkpoint_dot_policy")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--json", action="store_true", help="print one JSON line at the end")
    args = parser.parse_args()
    results = {mode: run_mode(mode, args.problem, args.n) for mode in args.modes.split(",")}
    print("target: first <= 1.5x the median of the next ones once warmed")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
