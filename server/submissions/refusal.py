"""Why the submission service refused a submission, in its own words: the edges map a `Refusal` to
their codes (`server.platform.http_refusals.HTTP_STATUS`: the REST API, its batch items and the web
page's JSON answer the same HTTP status for the same refusal)."""

from __future__ import annotations

import enum


class Refusal(enum.Enum):
    """What kind of refusal (HTTP: 422, 413, 404, 403, 409, 429, 503 in this order)."""

    INVALID = "invalid"  # a field is malformed, empty or not allowed for this caller
    TOO_LARGE = "too_large"  # the source is over the size limit
    UNKNOWN_PROBLEM = "unknown_problem"  # no such problem (or not published, for this caller)
    OUT_OF_SCOPE = "out_of_scope"  # the API client may not submit to this problem
    IN_PROGRESS = "in_progress"  # the same Idempotency-Key is being stored right now
    RATE_LIMITED = "rate_limited"  # too many submissions from this caller
    UNAVAILABLE = "unavailable"  # the queue is full or cannot be reached; nothing was stored
