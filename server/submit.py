"""One submission service for every door (REST API, web pages): the same checks, the same
admission control, the same storing and enqueueing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graders.problem import ProblemError
from server.admission import Rejected
from server.db import ApiClientRecord, SubmissionRecord
from server.text import unstorable_reason

if TYPE_CHECKING:
    from server.api.deps import Services

log = logging.getLogger(__name__)
MAX_EXTERNAL_ID_CHARS = 128  # the column's size (server/db.py)
MAX_CALLBACK_URL_CHARS = 2000


@dataclass
class SubmitError(Exception):
    """A submission refused: `status_code` (404, 413, 422, 429, 503), `message` for the client,
    `retry_after_s` for 429 and 503."""

    status_code: int
    message: str
    retry_after_s: int | None = None

    def __str__(self) -> str:
        return self.message


def submit(services: Services, *, problem: str, source: str, owner_key: str,
           user_id: int | None = None, client: ApiClientRecord | None = None, external_id: str | None = None,
           callback_url: str | None = None, unpublished_too: bool = False) -> SubmissionRecord:
    """Checks, admits, stores and enqueues one submission.

    The row is committed before its job is enqueued. When the queue refuses the job after the
    row is stored (Redis went away in between), the submission is still accepted: the sweeper
    of the workers enqueues it once Redis is back.

    Args:
        services: the app's services.
        problem: the problem slug; source: the Python source (any line endings).
        owner_key: who submits, for rate limiting ("user:<id>", "client:<name>", "ip:<address>").
        user_id: the web account that owns the submission, if any.
        client: the API client that owns it, if any (its problem scope and callback prefixes apply).
        external_id: the client's own id for it; callback_url: where to POST the verdict.
        unpublished_too: the submitter may submit to an unpublished problem (`problems.manage`).

    Returns:
        The stored submission (status "queued").

    Raises:
        SubmitError: 422 a NUL or a lone surrogate in any text (before anything is counted), 422 empty source, 413 too large, 404 unknown (or, unless `unpublished_too`,
            unpublished) problem, 403 a problem outside
            the client's scope, 422 a callback URL outside the client's allowed prefixes (or
            without a client), 429 rate limit, 503 queue full or unavailable. Nothing is stored then.
    """
    settings = services.settings
    for field, value in (("problem", problem), ("source", source), ("external_id", external_id),
                         ("callback_url", callback_url)):
        reason = unstorable_reason(value) if value is not None else None
        if reason is not None:  # checked first: no message below may quote such text, nothing is counted
            raise SubmitError(422, f"{field} contains {reason}; send UTF-8 text without it")
    if not source.strip():
        raise SubmitError(422, "the source is empty")
    if external_id is not None and not 1 <= len(external_id) <= MAX_EXTERNAL_ID_CHARS:
        raise SubmitError(422, f"external_id must have 1 to {MAX_EXTERNAL_ID_CHARS} characters")
    if callback_url is not None and not 1 <= len(callback_url) <= MAX_CALLBACK_URL_CHARS:
        raise SubmitError(422, f"callback_url must have 1 to {MAX_CALLBACK_URL_CHARS} characters")
    size = len(source.encode("utf-8"))
    if size > settings.max_source_bytes:
        raise SubmitError(413, f"the source is {size:,} bytes; the limit is {settings.max_source_bytes:,} bytes")
    try:
        if not problem or len(problem) > 64:
            raise KeyError(problem)
        if not unpublished_too and not services.problems.is_published(problem):
            raise KeyError(problem)
        services.problems.get(problem)
    except (KeyError, ProblemError):
        raise SubmitError(404, f"no problem {problem!r}") from None
    if client is not None and client.problem_scope is not None and problem not in client.problem_scope:
        raise SubmitError(403, f"this API client may not submit to {problem!r} (its problems: "
                               f"{', '.join(client.problem_scope) or 'none'})")
    if callback_url is not None:
        from server.callbacks import allowed_prefix

        if client is None:
            raise SubmitError(422, "callback_url needs an API client (its callback secret signs the callback)")
        if allowed_prefix(callback_url, client.callback_prefixes) is None:
            raise SubmitError(422, f"callback_url {callback_url!r} is not under this client's allowed callback "
                                   f"prefixes ({', '.join(client.callback_prefixes) or 'none'})")
    try:
        services.admission.check(owner_key)
        if services.redis_jobs is not None and not services.redis_jobs.available():
            raise Rejected(503, "the grading queue is unavailable right now; nothing was stored, try again in a "
                                "few seconds", 5, "queue_unavailable")
    except Rejected as rejected:
        if rejected.reason == "queue_unavailable":
            from server import metrics

            metrics.REJECTED.labels(reason="queue_unavailable").inc()
        raise SubmitError(rejected.status_code, rejected.message, rejected.retry_after_s) from None
    except SubmitError:
        raise
    except Exception as exc:  # the rate-limit storage (Redis) is unreachable
        log.warning("admission control failed: %s", exc)
        from server import metrics

        metrics.REJECTED.labels(reason="queue_unavailable").inc()
        raise SubmitError(503, "the grading queue is unavailable right now; nothing was stored, try again in a "
                               "few seconds", 5) from None
    record = services.store.create(problem=problem, source=source, user_id=user_id,
                                   client_id=client.id if client is not None else None, external_id=external_id,
                                   callback_url=callback_url)
    try:
        services.jobs.put(record.id)
        services.store.mark_enqueued(record.id)
    except Exception as exc:  # stored: the sweeper enqueues it when the queue is back
        log.warning("submission %s stored but not enqueued (%s); it will be enqueued later", record.id, exc)
    return record
