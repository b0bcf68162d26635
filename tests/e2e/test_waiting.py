"""`wait=true` holds no server thread: a real server keeps answering while hundreds of requests
wait for verdicts (when each waiter held a thread, 45 waiting requests stalled every other request for 22 s).

The test asserts behaviour, not speed: other requests are answered while every waiter is still
waiting (the server's own count says so before and after). How fast they are answered under load
is `bench/`'s business; on a loaded 2-core CI machine storing 200 submissions alone takes seconds."""

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
WAIT_TIMEOUT_S = 20  # long enough that no wait ends while the 200 are still being stored


def test_hundreds_of_waiting_requests_do_not_slow_other_requests(tmp_path: Path, judge_config: JudgeConfig) -> None:
    server = Server(
        tmp_path / "data",
        workers=1,
        env={"REMAT_JUDGE_WAIT_TIMEOUT_S": str(WAIT_TIMEOUT_S), "REMAT_JUDGE_RATE_LIMIT": ""},
    ).start()
    try:

        async def scenario() -> tuple[list[int], list[int], float]:
            limits = httpx.Limits(max_connections=WAITERS + 20, max_keepalive_connections=WAITERS + 20)
            async with httpx.AsyncClient(base_url=server.url, timeout=90, limits=limits) as client:

                async def wait_for_verdict(i: int) -> int:
                    response = await client.post(
                        "/api/v1/submissions",
                        params={"wait": "true"},
                        json={"problem": "checkpoint_dot_policy", "source": "\n" * i + SLOW},
                    )
                    return response.status_code

                async def waiting_now() -> int:
                    response = await client.get("/healthz")
                    assert response.status_code == 200
                    return int(response.json()["waiting_requests"])

                t0 = time.monotonic()
                waiting = [asyncio.create_task(wait_for_verdict(i)) for i in range(WAITERS)]
                counts = [0]
                while (
                    counts[-1] + sum(t.done() for t in waiting) < WAITERS and time.monotonic() - t0 < WAIT_TIMEOUT_S / 2
                ):
                    await asyncio.sleep(0.2)
                    counts.append(await waiting_now())
                counts = [counts[-1]]
                for _ in range(10):  # requests that need the thread pool and the database
                    assert (await client.get("/api/v1/problems")).status_code == 200
                    assert (await client.get("/readyz")).status_code == 200
                    counts.append(await waiting_now())
                codes = await asyncio.gather(*waiting)
                return codes, counts, time.monotonic() - t0

        codes, counts, elapsed = asyncio.run(scenario())
    finally:
        server.stop()
    # every request was stored and waiting before the other requests were sent, and still waiting
    # after they were answered: waiting holds no thread the other requests need
    # (less the few the one grading thread finished within their wait, answered 200)
    assert codes.count(202) + codes.count(200) == WAITERS
    graded = codes.count(200)
    assert min(counts) >= WAITERS - graded, f"waiting requests seen by the server: {counts}, {graded} graded"
    assert graded < WAITERS // 4, f"{graded} of {WAITERS} slow submissions graded by one thread within the wait"
    assert elapsed < 3 * WAIT_TIMEOUT_S, f"{WAITERS} waits took {elapsed:.1f} s"
