"""Time from POST to verdict for a problem's reference (default checkpoint_dot_policy), through a real server.

First measures the in-process floor in the same run (bench/floor.py, in its own process: the
judge's own work with no process boundaries). Then starts `remat-judge serve` on a free loopback
port with a fresh data directory (so the first submission also builds the reference cache), and
posts the reference with `wait=true`, one at a time: N times with --pause-s seconds between them,
then N times back to back. Prints each latency, the medians, and each median as a ratio to the
floor. Every submission differs by leading blank lines (the same program, other line numbers in
its residual notes), so the result cache answers none of them unless --cached is given.
Usage:
    .venv/bin/python bench/latency.py [N] [--pause-s 3] [--cached] [--url http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from common import REPO

from tests.support import free_port


def start_server(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "remat-judge"), "serve", "--port", str(port), "--data-dir", str(data_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "REMAT_JUDGE_RATE_LIMIT": "", "REMAT_JUDGE_ALLOW_ANONYMOUS_API": "true"},
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def _post_series(
    client: httpx.Client, problem: str, source: str, n: int, pause_s: float, offset: int, cached: bool
) -> tuple[list[float], list[dict]]:
    """Posts `source` n times with wait=true; returns latencies (ms) and timing phases.

    Unless `cached`, submission i is the source with i + offset blank lines in front: the same
    program, but its residual notes name other lines, so the judge's result cache cannot answer
    for it and every verdict is computed (what the targets are about)."""
    latencies_ms, phases = [], []
    for i in range(n):
        if i and pause_s:
            time.sleep(pause_s)
        body_source = source if cached else "\n" * (i + offset) + source
        t0 = time.perf_counter()
        r = client.post(
            "/api/v1/submissions",
            params={"wait": "true"},
            json={"problem": problem, "source": body_source},
        )
        ms = (time.perf_counter() - t0) * 1000
        body = r.json()
        latencies_ms.append(ms)
        phases.append(body.get("timing_ms", {}))
        print(
            f"{i + 1:3d}  HTTP {r.status_code}  {body.get('verdict')}  {ms:8.0f} ms  "
            f"{json.dumps(body.get('timing_ms'))}"
        )
    return latencies_ms, phases


def _summary(name: str, latencies_ms: list[float], phases: list[dict], floor: dict | None) -> dict:
    median = statistics.median(latencies_ms)
    ratio = median / floor["floor_ms"] if floor else None
    print(
        f"{name}: median POST-to-verdict {median:.0f} ms over {len(latencies_ms)} "
        f"(min {min(latencies_ms):.0f}, max {max(latencies_ms):.0f})"
        + (f" = {ratio:.2f}x the in-process floor" if ratio else "")
    )
    for key in ("queue", "sandbox", "verify", "total"):
        values = [p[key] for p in phases if key in p]
        if values:
            print(f"  median {key}: {statistics.median(values):.0f} ms")
    return {"median_ms": median, "ratio_to_floor": ratio}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=10, help="submissions per series")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--problem", default="checkpoint_dot_policy")
    parser.add_argument("--file", default=None, help="the submission (default: the problem's reference.py)")
    parser.add_argument("--no-floor", action="store_true", help="skip measuring the in-process floor")
    parser.add_argument(
        "--pause-s", type=float, default=3.0, help="seconds between submissions in the paused series (real users pause)"
    )
    parser.add_argument(
        "--cached", action="store_true", help="post the identical source every time (answered by the result cache)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line at the end")
    args = parser.parse_args()
    if args.file is None:
        args.file = str(REPO / "problems" / args.problem / "reference.py")
    floor = None
    if not args.no_floor:
        out = subprocess.run(
            [sys.executable, str(REPO / "bench" / "floor.py"), "--problem", args.problem]
            + ["--file", args.file, "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        floor = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"in-process floor: {floor['floor_ms']:.0f} ms (export {floor['export_ms']:.0f} ms, "
            f"verify {floor['verify_ms']:.0f} ms)"
        )
    proc = None
    results = {"floor": floor}
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url
        if url is None:
            proc, url = start_server(Path(tmp))
        source = Path(args.file).read_text()
        try:
            with httpx.Client(base_url=url, timeout=300) as client:
                first, _ = _post_series(client, args.problem, source, 1, 0.0, 10_000, args.cached)
                print(f"first (builds the reference cache if needed): {first[0]:.0f} ms")
                print(f"-- with {args.pause_s:g} s pauses")
                lat, ph = _post_series(client, args.problem, source, args.n, args.pause_s, 0, args.cached)
                results["paused"] = _summary("paused", lat, ph, floor)
                print("-- back to back")
                lat, ph = _post_series(client, args.problem, source, args.n, 0.0, args.n, args.cached)
                results["back_to_back"] = _summary("back to back", lat, ph, floor)
        finally:
            if proc is not None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
    print("targets: <= 1.3x the in-process floor with pauses, <= 1.5x back to back")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
