"""Waiting for verdicts without holding a thread (`POST /api/v1/submissions?wait=true`).

A waiting request is an `asyncio.Future` on the server's event loop, not a blocked thread: 500
waiting requests cost 500 futures, and `/healthz` answers as fast as with none. Futures are
resolved by whichever comes first:
- `notify_threadsafe` from a grading thread of this process (embedded mode);
- a message on Redis's `FINISHED_CHANNEL` from any worker (distributed mode);
- a poll of the database every `poll_s` seconds for the ids being waited for (covers a missed
  message, e.g. while Redis restarts).
Futures are removed when their wait ends, so nothing grows with the number of submissions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from server.store.faults import Outage

log = logging.getLogger(__name__)
REDIS_LISTEN = Outage("listening for verdicts on Redis", log)


class CompletionHub:
    """Futures of the requests waiting for verdicts, per submission id.

    Args:
        finished: given ids, returns those whose verdict is stored (a database query; runs in a
            worker thread).
        poll_s: seconds between database polls while anyone waits.
    """

    def __init__(self, finished: Callable[[list[str]], set[str]], *, poll_s: float = 1.0):
        self.finished, self.poll_s = finished, poll_s
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def waiting(self) -> int:
        """How many requests wait now."""
        return sum(len(futures) for futures in self._waiters.values())

    def start(self, redis_url: str | None = None) -> None:
        """Binds to the running event loop and starts the poller (and the Redis listener)."""
        self._loop = asyncio.get_running_loop()
        self._tasks.append(asyncio.create_task(self._poll_forever()))
        if redis_url:
            self._tasks.append(asyncio.create_task(self._listen(redis_url)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
        self._tasks.clear()

    async def wait(self, submission_id: str, timeout_s: float) -> bool:
        """Waits until the submission's verdict is stored or `timeout_s` passes; returns whether
        it is stored. Holds no thread while waiting."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiters.setdefault(submission_id, set()).add(future)
        try:
            if submission_id in await run_in_threadpool(self.finished, [submission_id]):
                return True
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            futures = self._waiters.get(submission_id)
            if futures is not None:
                futures.discard(future)
                if not futures:
                    del self._waiters[submission_id]

    def notify(self, submission_id: str) -> None:
        """Resolves the waits for `submission_id` (call on the event loop)."""
        for future in self._waiters.get(submission_id, ()):
            if not future.done():
                future.set_result(None)

    def notify_threadsafe(self, submission_id: str) -> None:
        """`notify` from any thread (a grading thread of this process)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.notify, submission_id)

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            ids = list(self._waiters)
            if not ids:
                continue
            try:
                done = await run_in_threadpool(self.finished, ids)
            except Exception as exc:  # noqa: BLE001 - the database is away: the waits time out, nothing breaks
                log.warning("polling for verdicts failed: %s", exc)
                continue
            for submission_id in done:
                self.notify(submission_id)

    async def _listen(self, url: str) -> None:
        # Redis only when scaled out: the embedded judge runs without it
        import redis.asyncio as aioredis

        from server.grading.redis_jobs import FINISHED_CHANNEL

        while True:
            client = aioredis.Redis.from_url(url, socket_connect_timeout=2.0)
            try:
                async with client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(FINISHED_CHANNEL)
                    REDIS_LISTEN.recovered()
                    async for message in pubsub.listen():
                        data = message.get("data")
                        if isinstance(data, bytes):
                            self.notify(data.decode("ascii", "replace"))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - Redis is away: the poller covers it; reconnect shortly (said once)
                REDIS_LISTEN.failed(exc)
                await asyncio.sleep(1.0)
            finally:
                try:
                    await client.aclose()
                except Exception:  # noqa: BLE001 - closing a dead connection
                    pass
