"""PostgreSQL restarted and then down for seconds in the middle of a burst, on the distributed mode
(bounded for CI: the full run with worker, Redis and API kills is `bench/chaos.py`): real
PostgreSQL and redis-server of the test's own, one API, two workers, clients that retry 5xx answers
and connection failures with the same Idempotency-Key (`tests/chaos.py`).

What must hold: no 5xx but 503 (with Retry-After), nothing lost, nothing stored twice, every
verdict as expected, no submission graded more than once (the outage burns no attempt: a verdict
computed meanwhile is stored when the database returns), and no traceback in any log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos import ChaosDeployment, run

pytestmark = [pytest.mark.e2e, pytest.mark.jail]


def test_a_postgres_restart_and_outage_mid_burst_lose_double_and_fail_nothing(tmp_path: Path) -> None:
    from tests.services import _postgres_bin_dir, _unavailable, find_binary

    missing = _postgres_bin_dir()
    if isinstance(missing, str) or find_binary("redis-server") is None:
        _unavailable(missing if isinstance(missing, str) else "redis-server is not installed")
    deployment = ChaosDeployment(tmp_path).start()
    try:
        report = run(
            deployment,
            submissions=36,
            clients=6,
            spread_s=24,
            timeout_s=600,
            faults=[
                (6.0, "pg_ctl restart -m fast", deployment.postgres_restart),
                (12.0, "PostgreSQL down 4 s", lambda: deployment.postgres_down(4)),
            ],
        )
    finally:
        deployment.stop()
    print(report.line(), report.events)
    assert all("failed" not in event for event in report.events), report.events
    assert report.accepted == report.sent == 36 and report.graded == 36 and report.lost == 0, report.line()
    assert report.duplicated == 0 and report.wrong == 0, report.line()
    assert report.server_errors == 0, report.line()
    assert report.regraded == 0 and report.internal_errors == 0, report.line()
    assert sum(report.tracebacks.values()) == 0, report.line()
