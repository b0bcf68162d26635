"""Sign-in throttling per account and per IP address (`limits`' moving window; in Redis when
scaled out, so every API process shares one count).

Failed sign-ins are counted, not successful ones: a student who types their password right is
never slowed, while guessing stops after `REMAT_JUDGE_SIGNIN_FAILURES_PER_ACCOUNT` wrong passwords
for one email (whichever address they come from) or `REMAT_JUDGE_SIGNIN_FAILURES_PER_IP` from one
address (whichever emails they try). Over either limit the password is not even checked: the page
answers 429 with Retry-After. Unknown emails count like known ones, so throttling reveals nothing.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter


class SignInThrottle:
    """Counts failed sign-ins.

    Args:
        per_account, per_ip: `limits` notation ("10 per 15 minutes"); empty: no limit.
        storage_uri: `memory://` or the Redis URL.
    Raises:
        ValueError: a limit cannot be parsed.
    """

    def __init__(self, *, per_account: str, per_ip: str, storage_uri: str):
        self.per_account = parse(per_account) if per_account.strip() else None
        self.per_ip = parse(per_ip) if per_ip.strip() else None
        self.limiter = MovingWindowRateLimiter(storage_from_string(storage_uri))

    def _keys(self, email: str, ip: str) -> list[tuple[RateLimitItem, str]]:
        keys = []
        if self.per_account is not None:
            keys.append((self.per_account, "account:" + email.strip().lower()))
        if self.per_ip is not None:
            keys.append((self.per_ip, "ip:" + ip))
        return keys

    def retry_after_s(self, email: str, ip: str) -> int | None:
        """Whole seconds to wait before `email` may be tried from `ip` again, or None (allowed)."""
        for item, key in self._keys(email, ip):
            if not self.limiter.test(item, "signin", key):
                reset_at, _ = self.limiter.get_window_stats(item, "signin", key)
                return max(1, math.ceil(reset_at - time.time()))
        return None

    def failed(self, email: str, ip: str) -> None:
        """Counts one failed sign-in for `email` and for `ip`."""
        for item, key in self._keys(email, ip):
            self.limiter.hit(item, "signin", key)
