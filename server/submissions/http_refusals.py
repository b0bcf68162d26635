"""How the HTTP edges answer a refused submission: the REST API (`server.api.submissions`), its batch
items and the web page's JSON answers give the same status and words for the same `Refusal`, so the
mapping lives here, beside the refusals and below both edges, and neither edge imports the other
(docs/ARCHITECTURE.md, "The server's floors")."""

from __future__ import annotations

from fastapi import HTTPException, status

from server.submissions.refusal import Refusal
from server.submissions.submit import SubmitError

# The HTTP status of each refusal of the submission service.
HTTP_STATUS: dict[Refusal, int] = {
    Refusal.INVALID: status.HTTP_422_UNPROCESSABLE_CONTENT,
    Refusal.TOO_LARGE: status.HTTP_413_CONTENT_TOO_LARGE,
    Refusal.UNKNOWN_PROBLEM: status.HTTP_404_NOT_FOUND,
    Refusal.OUT_OF_SCOPE: status.HTTP_403_FORBIDDEN,
    Refusal.IN_PROGRESS: status.HTTP_409_CONFLICT,
    Refusal.RATE_LIMITED: status.HTTP_429_TOO_MANY_REQUESTS,
    Refusal.UNAVAILABLE: status.HTTP_503_SERVICE_UNAVAILABLE,
}


def submit_error(exc: SubmitError) -> HTTPException:
    """The HTTP error of a refused submission (with `Retry-After`, in whole seconds, when the refusal
    says how long to wait)."""
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None
    return HTTPException(HTTP_STATUS[exc.refusal], exc.message, headers=headers)
