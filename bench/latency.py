"""Time from POST to verdict for the reference of checkpoint_dot_policy, through a real server.

First measures the in-process floor in the same run (bench/floor.py, in its own process: the
judge's own work with no process boundaries). Then starts `remat-judge serve` on a free loopback
port with a fresh data directory (so the first submission also builds the reference cache), posts
the reference N times with `wait=true`, one at a time (with --pause-s seconds between them), and
prints the latency of each, the median, and the median as a ratio to the floor.
Usage:
    .venv/bin/python bench/latency.py [N] [--pause-s 3] [--url http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def start_server(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(Path(sys.executable).parent / "remat-judge"), "serve", "--port", str(port),
                             "--data-dir", str(data_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=10)
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--file", default=str(REPO / "problems/checkpoint_dot_policy/reference.py"))
    parser.add_argument("--no-floor", action="store_true", help="skip measuring the in-process floor")
    parser.add_argument("--pause-s", type=float, default=0.0,
                        help="seconds between submissions (0: back to back; real users pause, and the "
                             "warm pool refills in the pause)")
    args = parser.parse_args()
    floor = None
    if not args.no_floor:
        out = subprocess.run([sys.executable, str(REPO / "bench" / "floor.py"), "--file", args.file, "--json"],
                             capture_output=True, text=True, check=True)
        floor = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"in-process floor: {floor['floor_ms']:.0f} ms (export {floor['export_ms']:.0f} ms, "
              f"verify {floor['verify_ms']:.0f} ms)")
    proc = None
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url
        if url is None:
            proc, url = start_server(Path(tmp))
        source = Path(args.file).read_text()
        latencies_ms, phases = [], []
        try:
            with httpx.Client(base_url=url, timeout=300) as client:
                for i in range(args.n):
                    if i:
                        time.sleep(args.pause_s)
                    t0 = time.perf_counter()
                    r = client.post("/api/v1/submissions", params={"wait": "true"},
                                    json={"problem": "checkpoint_dot_policy", "source": source})
                    ms = (time.perf_counter() - t0) * 1000
                    body = r.json()
                    latencies_ms.append(ms)
                    phases.append(body.get("timing_ms", {}))
                    print(f"{i + 1:3d}  HTTP {r.status_code}  {body.get('verdict')}  {ms:8.0f} ms  "
                          f"{json.dumps(body.get('timing_ms'))}")
        finally:
            if proc is not None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
    warm = latencies_ms[1:] or latencies_ms
    print(f"first (builds the reference cache): {latencies_ms[0]:.0f} ms")
    print(f"median POST-to-verdict: {statistics.median(latencies_ms):.0f} ms over {len(latencies_ms)} "
          f"(warm median {statistics.median(warm):.0f} ms, min {min(warm):.0f}, max {max(warm):.0f})")
    if floor is not None:
        print(f"warm median / in-process floor: {statistics.median(warm) / floor['floor_ms']:.2f}x")
    for key in ("sandbox", "verify", "total"):
        values = [p[key] for p in phases[1:] if key in p] or [p[key] for p in phases if key in p]
        if values:
            print(f"  median {key}: {statistics.median(values):.0f} ms")


if __name__ == "__main__":
    main()
