"""Signed callbacks, like Stripe's webhooks: the header `X-Remat-Judge-Signature: t=<unix
seconds>,v1=<hex>` where `<hex>` is HMAC-SHA256, under the client's `callback_secret` (UTF-8), of
the ASCII decimal timestamp, a literal ".", then the exact body bytes. `verify` is what a receiver
does."""

from __future__ import annotations

import hashlib
import hmac
import re
import time

SIGNATURE_HEADER = "X-Remat-Judge-Signature"


def sign(body: bytes, secret: str, timestamp: int) -> str:
    """The signature header's value for `body` sent at `timestamp`.

    Args:
        body: the exact bytes POSTed. secret: the client's `callback_secret` (used as UTF-8).
        timestamp: unix seconds (an integer; it is signed as its ASCII decimal form).
    Returns:
        `t=<timestamp>,v1=<hex HMAC-SHA256 of b"<timestamp>." + body>`.
    Raises:
        ValueError: `secret` is empty (an HMAC under an empty key proves nothing).
    """
    if not secret:
        raise ValueError("a callback secret is required to sign a callback")
    timestamp = int(timestamp)
    return f"t={timestamp},v1={_mac(body, secret, timestamp)}"


def verify(header: str, body: bytes, secret: str, *, tolerance_s: float = 300, now: float | None = None) -> bool:
    """What a receiver does with the signature header: True when one of its `v1` signatures is
    the HMAC of this timestamp and body under `secret`, and the timestamp is within `tolerance_s`
    seconds (either side) of `now` (unix seconds; default the clock).

    Parses `t` (the first one) and every `v1` (several may be present while a secret is being
    rotated); unknown keys are ignored. Compares in constant time (`hmac.compare_digest`). A
    malformed header is False, never an exception.
    """
    timestamp: int | None = None
    candidates: list[bytes] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t" and timestamp is None:
            if not re.fullmatch(r"[0-9]{1,15}", value):
                return False
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value.encode("utf-8", "replace"))
    if timestamp is None or not candidates or not secret:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = _mac(body, secret, timestamp).encode("ascii")
    matched = False
    for candidate in candidates:  # no early exit: every candidate is compared
        matched |= hmac.compare_digest(expected, candidate)
    return matched


def _mac(body: bytes, secret: str, timestamp: int) -> str:
    return hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()
