"""`wait=true` holds no server thread: a real server keeps answering while hundreds of requests
wait for verdicts (before issue 10, 45 waiting requests stalled every other request for 22 s)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from graders.pipeline import JudgeConfig
from tests.support import PROBLEMS, Server

pytestmark = [pytest.mark.e2e, pytest.mark.jail]
SLOW = "import time\ntime.sleep(5)\n" + (PROBLEMS / "checkpoint_dot_policy" / "reference.py").read_text()
WAITERS = 200


def test_hundreds_of_waiting_requests_do_not_slow_other_requests(tmp_path: Path, judge_config: JudgeConfig) -> None:
    server = Server(
        tmp_path / "data", workers=1, env={"REMAT_JUDGE_WAIT_TIMEOUT_S": "4", "REMAT_JUDGE_RATE_LIMIT": ""}
    ).start()
    try:

        async def scenario() -> tuple[list[int], list[float], float]:
            limits = httpx.Limits(max_connections=WAITERS + 20, max_keepalive_connections=WAITERS + 20)
            async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:

                async def wait_for_verdict(i: int) -> int:
                    response = await client.post(
                        "/api/v1/submissions",
                        params={"wait": "true"},
                        json={"problem": "checkpoint_dot_policy", "source": "\n" * i + SLOW},
                    )
                    return response.status_code

                t0 = time.monotonic()
                waiting = [asyncio.create_task(wait_for_verdict(i)) for i in range(WAITERS)]
                await asyncio.sleep(1.5)  # every request is in, waiting
                latencies = []
                for _ in range(10):
                    t = time.monotonic()
                    for path in ("/healthz", "/api/v1/problems"):
                        assert (await client.get(path)).status_code == 200
                    latencies.append(time.monotonic() - t)
                codes = await asyncio.gather(*waiting)
                return codes, latencies, time.monotonic() - t0

        codes, latencies, elapsed = asyncio.run(scenario())
    finally:
        server.stop()
    # each wait ends at the 4 s wait timeout with 202 (one grading thread cannot finish 200 slow
    # submissions in time), all at about the same moment: none queued behind a thread pool
    assert codes.count(202) + codes.count(200) == WAITERS
    assert elapsed < 30, f"{WAITERS} waits took {elapsed:.1f} s"
    assert max(latencies) < 2.0, f"other requests took up to {max(latencies):.2f} s while {WAITERS} requests waited"
