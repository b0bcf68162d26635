"""Chaos on the distributed mode: nothing lost, nothing doubled, no 500.

Numbers are printed; nothing is asserted (the bounded version is `tests/e2e/test_chaos.py`).

    .venv/bin/python bench/chaos.py                      # 300 submissions over 150 s, every fault
    .venv/bin/python bench/chaos.py --submissions 60 --spread-s 40 --only postgres

It starts its own PostgreSQL and redis-server, one API and two workers on loopback (the short
timings of the tests: 6 s leases and heartbeats, a 1 s sweep), and 12 clients that retry 5xx
answers and connection failures with the same Idempotency-Key (`tests/chaos.py`). Faults, at
fractions of the spread: a worker SIGKILLed (twice), Redis stopped for 15 s, the API SIGKILLed,
`pg_ctl restart -m fast`, and PostgreSQL stopped for 8 s. Run as root (the workers' jails).
"""

from __future__ import annotations

import argparse

from common import scratch_dir

from tests.chaos import ChaosDeployment, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=300)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--spread-s", type=float, default=150)
    parser.add_argument(
        "--only", choices=["all", "postgres"], default="all", help="postgres: only the PostgreSQL restart and outage"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = parser.parse_args()

    with scratch_dir("remat-chaos-", keep=args.keep) as root:
        dep = ChaosDeployment(root)
        s = args.spread_s
        faults = [
            (0.45 * s, "pg_ctl restart -m fast", dep.postgres_restart),
            (0.6 * s, "PostgreSQL down 8 s", lambda: dep.postgres_down(8)),
        ]
        if args.only == "all":
            faults += [
                (0.1 * s, "worker 0 SIGKILL", lambda: dep.kill_worker(0)),
                (0.2 * s, "Redis down 15 s", lambda: dep.redis_down(15)),
                (0.35 * s, "API SIGKILL", dep.kill_api),
                (0.75 * s, "worker 1 SIGKILL", lambda: dep.kill_worker(1)),
            ]
        try:
            dep.start()
            print(f"deployment: PostgreSQL, Redis, 1 API, 2 workers; data in {root}", flush=True)
            report = run(
                dep,
                submissions=args.submissions,
                clients=args.clients,
                spread_s=s,
                faults=faults,
                timeout_s=max(900.0, 4 * s),
            )
            for event in report.events:
                print("fault:", event)
            print(report.line())
        finally:
            dep.stop()


if __name__ == "__main__":
    main()
