"""How long the judge takes to recover, with the default timings: a worker SIGKILLed
mid-job under a backlog, and PostgreSQL down for a while. Numbers are printed; nothing is asserted.

    .venv/bin/python bench/recovery.py --backlog 40 --outage-s 8

Starts its own PostgreSQL, redis-server, one API and two workers (the defaults: 15 s leases, 20 s
heartbeats, a 2 s sweep; `tests/chaos.py`), then:
1. sends `--backlog` submissions at once, waits until both workers grade, SIGKILLs worker 0 and
   reports, for the submissions it held, the time from the kill to their verdict, and how many of
   the others were graded meanwhile (the backlog they waited behind);
2. stops PostgreSQL for `--outage-s`, submits during it (503s) and reports the time from the
   database's return to the first accepted submission and to the verdict of one submitted then.
Run as root (the workers' jails).
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import httpx
from common import scratch_dir

from tests.chaos import ChaosDeployment, bank

DEFAULTS = {"REMAT_JUDGE_HEARTBEAT_TIMEOUT_S": "20", "REMAT_JUDGE_LEASE_S": "15", "REMAT_JUDGE_SWEEP_INTERVAL_S": "2"}


def rows(dep: ChaosDeployment) -> dict[str, tuple]:
    import psycopg

    with psycopg.connect(dep.database_url) as connection:
        return {
            r[0]: r[1:]
            for r in connection.execute(
                "SELECT id, status, attempts, worker_id, finished_at FROM submissions"
            ).fetchall()
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=40)
    parser.add_argument("--outage-s", type=float, default=8.0)
    args = parser.parse_args()
    with scratch_dir("remat-recovery-") as root:
        dep = ChaosDeployment(root, env=DEFAULTS)
        sources = [s for s, _ in bank()]
        try:
            dep.start()
            assert dep.api is not None
            with httpx.Client(base_url=dep.api.url, timeout=60) as client:
                ids = [
                    client.post(
                        "/api/v1/submissions",
                        json={"problem": "checkpoint_dot_policy", "source": f"# {i}\n" + sources[i % len(sources)]},
                    ).json()["id"]
                    for i in range(args.backlog)
                ]
                victim = dep.workers[0]
                while True:  # both workers busy
                    held = {i for i, r in rows(dep).items() if r[0] == "running"}
                    if len(held) >= 2:
                        break
                    time.sleep(0.2)
                before = rows(dep)
                killed_at = time.time()
                assert victim.proc is not None
                os.killpg(victim.proc.pid, signal.SIGKILL)
                victim.proc.wait(30)
                done_before = sum(1 for r in before.values() if r[0] == "done")
                while any(rows(dep)[i][0] != "done" for i in ids):
                    time.sleep(0.5)
                after = rows(dep)
                regraded = [i for i in ids if after[i][1] > 1]
                for i in regraded:
                    took = after[i][3].timestamp() - killed_at
                    graded_between = sum(1 for j in ids if after[j][3] and after[j][3] < after[i][3]) - done_before
                    print(
                        f"worker kill: {i[:8]} (attempt {after[i][1]}) graded {took:.1f} s after the kill, while "
                        f"{graded_between} others of the backlog were graded"
                    )
                print(f"worker kill: {len(regraded)} in-flight submissions regraded; backlog {args.backlog}")

                dep.postgres.down("fast")
                down_at = time.time()
                time.sleep(args.outage_s)
                dep.postgres.start()
                back_at = time.time()
                while True:
                    answer = client.post(
                        "/api/v1/submissions",
                        json={"problem": "checkpoint_dot_policy", "source": "# after\n" + sources[0]},
                    )
                    if answer.status_code == 202:
                        break
                    time.sleep(0.1)
                accepted_at = time.time()
                new_id = answer.json()["id"]
                while client.get(f"/api/v1/submissions/{new_id}").json()["status"] != "done":
                    time.sleep(0.2)
                print(
                    f"PostgreSQL down {back_at - down_at:.1f} s: the first submission accepted "
                    f"{accepted_at - back_at:.1f} s after it was back, its verdict {time.time() - back_at:.1f} s after"
                )
        finally:
            dep.stop()


if __name__ == "__main__":
    main()
