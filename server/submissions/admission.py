"""Admission control (like Judge0's): refuse new submissions early and clearly instead of
queueing more than the judge can grade.

- 429 Too Many Requests past `REMAT_JUDGE_RATE_LIMIT` per client (`limits`' moving window;
  counted in Redis when scaled out, so every API process shares one count);
- 503 Service Unavailable when `REMAT_JUDGE_MAX_QUEUE_DEPTH` submissions already wait, or when the
  queue (Redis) cannot be reached.
Both carry `Retry-After` (seconds) and a message that says why.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from limits import parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from server.platform import metrics
from server.submissions.refusal import Refusal

QUEUE_FULL_RETRY_AFTER_S = 30


@dataclass
class Rejected(Exception):
    """A submission refused before it was stored.

    Attributes:
        refusal: RATE_LIMITED or UNAVAILABLE; message: why, for the client; retry_after_s: whole
            seconds.
        reason: the metrics label (rate_limited, queue_full, queue_unavailable).
    """

    refusal: Refusal
    message: str
    retry_after_s: int
    reason: str

    def __str__(self) -> str:
        return self.message


class Admission:
    """Decides whether one more submission may be stored now.

    Args:
        rate_limit: `limits` notation (`30/minute`, `100/hour;10/minute`); empty: no limit.
        storage_uri: `memory://` (one process) or the Redis URL (shared by API processes).
        max_queue_depth: refuse past this many waiting submissions; 0: no cap.
        queue_depth: the current number of waiting submissions (a database count).
    Raises:
        ValueError: `rate_limit` cannot be parsed.
    """

    def __init__(self, *, rate_limit: str, storage_uri: str, max_queue_depth: int, queue_depth: Callable[[], int]):
        self.items = [parse(part) for part in rate_limit.split(";") if part.strip()] if rate_limit.strip() else []
        self.limiter = MovingWindowRateLimiter(storage_from_string(storage_uri)) if self.items else None
        self.max_queue_depth, self.queue_depth = max_queue_depth, queue_depth

    def check(self, client_key: str) -> None:
        """Counts one submission for `client_key` ("user:42", "client:ci-bot", "ip:10.0.0.7").

        Raises:
            Rejected: 429 past the rate limit, 503 when the queue is full.
            Whatever the rate-limit storage raises when it is unreachable (Redis down): the caller
            answers 503 as for the queue.
        """
        if self.limiter is not None:
            for item in self.items:
                if not self.limiter.hit(item, "submissions", client_key):
                    reset_at, _ = self.limiter.get_window_stats(item, "submissions", client_key)
                    metrics.REJECTED.labels(reason="rate_limited").inc()
                    raise Rejected(
                        Refusal.RATE_LIMITED,
                        f"too many submissions: the limit is {item} per client; try again in a moment",
                        max(1, math.ceil(reset_at - time.time())),
                        "rate_limited",
                    )
        if self.max_queue_depth > 0:
            depth = self.queue_depth()
            if depth >= self.max_queue_depth:
                metrics.REJECTED.labels(reason="queue_full").inc()
                raise Rejected(
                    Refusal.UNAVAILABLE,
                    f"the judge is busy: {depth:,} submissions are waiting to be graded (the cap "
                    f"is {self.max_queue_depth:,}); nothing was stored, try again later",
                    QUEUE_FULL_RETRY_AFTER_S,
                    "queue_full",
                )
