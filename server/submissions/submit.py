"""One submission service for every door (REST API, web pages): the same checks, the same
admission control, the same storing and enqueueing (`submit`).

With an idempotency key (IETF httpapi "The Idempotency-Key HTTP Header Field" draft), a repeat of
a request within 24 hours, from the same owner with the same key and the same problem, source,
external_id and callback_url, answers the submission stored first (nothing new is stored or
counted against the rate limit); the same key with another request is a 422. The key is stored in
the same transaction as the submission, so concurrent repeats store one.

The row is committed before its job is enqueued. When the queue refuses the job after the row is
stored (Redis went away in between), the submission is still accepted: the sweeper of the
workers enqueues it once Redis is back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from graders.problems.spec import ProblemError
from server.delivery.targets import allowed_prefix
from server.platform import metrics
from server.platform.text import unstorable_reason
from server.store.accounts import ApiClientRecord
from server.store.faults import is_database_fault
from server.store.submissions import Idempotency, IdempotencyKeyTaken, SubmissionIntake, SubmissionRecord
from server.submissions.admission import Admission, Rejected
from server.submissions.refusal import Refusal

if TYPE_CHECKING:
    from graders.problems.problem import ProblemRepository
    from server.settings import Settings

log = logging.getLogger(__name__)
MAX_EXTERNAL_ID_CHARS = 128  # the column's size (server/store/submissions/records.py)
MAX_CALLBACK_URL_CHARS = 2000


@dataclass
class SubmitError(Exception):
    """A submission refused: why (`Refusal`, which each edge maps to its own code), `message`
    for the client, `retry_after_s` for RATE_LIMITED, UNAVAILABLE and IN_PROGRESS."""

    refusal: Refusal
    message: str
    retry_after_s: int | None = None

    def __str__(self) -> str:
        return self.message


MAX_IDEMPOTENCY_KEY_CHARS = 255
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII, as an HTTP header's token or sf-string


class JobSink(Protocol):
    """Where a stored submission's job goes (`server.grading.queue.JobQueue`)."""

    def put(self, submission_id: str) -> None: ...


class QueueHealth(Protocol):
    """Whether the shared queue answers (`server.grading.redis_jobs.RedisJobs`, scaled out)."""

    def available(self) -> bool: ...


class SubmitParts(Protocol):
    """What `submit` needs of the app's parts: `server.services.Services` has them all, and the
    container stands above submissions, so it is named here by what it holds, not by its type."""

    @property
    def settings(self) -> Settings: ...
    @property
    def problems(self) -> ProblemRepository: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def submissions(self) -> SubmissionIntake: ...
    @property
    def jobs(self) -> JobSink: ...
    @property
    def redis_jobs(self) -> QueueHealth | None: ...


def idempotency_key_of(header: str | None) -> str | None:
    """The key of an `Idempotency-Key` header: its value, or the string inside when it is a
    structured-field string (`"8e03978e-..."`, as the IETF draft writes it); None without one.

    Raises:
        SubmitError(Refusal.INVALID): not 1 to 255 visible ASCII characters.
    """
    if header is None:
        return None
    value = header.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not IDEMPOTENCY_KEY.fullmatch(value):
        raise SubmitError(Refusal.INVALID, "Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID, say)")
    return value


def request_fingerprint(*, problem: str, source: str, external_id: str | None, callback_url: str | None) -> str:
    """SHA-256 of what a submission request asks for: a repeat with the same key must ask the same."""
    body = json.dumps([problem, source, external_id, callback_url], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("ascii")).hexdigest()


def submit(
    services: SubmitParts,
    *,
    problem: str,
    source: str,
    owner_key: str,
    user_id: int | None = None,
    client: ApiClientRecord | None = None,
    external_id: str | None = None,
    callback_url: str | None = None,
    unpublished_too: bool = False,
    idempotency_key: str | None = None,
) -> SubmissionRecord:
    """Checks, admits, stores and enqueues one submission; a repeat of a request with the same
    `idempotency_key` answers the submission stored first (see the module docstring).

    Args:
        services: the app's parts (`server.services.Services`, as `SubmitParts`).
        problem: the problem slug; source: the Python source (any line endings).
        owner_key: who submits, for rate limiting ("user:<id>", "client:<name>", "ip:<address>").
        user_id: the web account that owns the submission, if any.
        client: the API client that owns it, if any (its problem scope and callback prefixes apply).
        external_id: the client's own id for it; callback_url: where to POST the verdict.
        unpublished_too: the submitter may submit to an unpublished problem (`problems.manage`).

    Returns:
        The stored submission (status "queued").

    Raises:
        SubmitError: INVALID a NUL or a lone surrogate in any text (before anything is
            counted), an empty source, a callback URL outside the client's allowed prefixes (or
            without a client), an idempotency key reused for another request; TOO_LARGE;
            UNKNOWN_PROBLEM (or, unless `unpublished_too`, unpublished); OUT_OF_SCOPE for the
            client; RATE_LIMITED; UNAVAILABLE, the queue full or unreachable; IN_PROGRESS, the
            same idempotency key being stored. Nothing is stored then.
        A database fault (`server.store.faults.is_database_fault`) propagates: the app answers 503.
    """
    _check_text(problem=problem, source=source, external_id=external_id, callback_url=callback_url)
    idempotency = _idempotency_of(
        owner_key, idempotency_key, problem=problem, source=source, external_id=external_id, callback_url=callback_url
    )
    if idempotency is not None:
        stored = _replay(services, idempotency)
        if stored is not None:
            return stored
    _check_fields(services, source=source, external_id=external_id, callback_url=callback_url)
    _check_target(services, problem=problem, client=client, callback_url=callback_url, unpublished_too=unpublished_too)
    _admit(services, owner_key)
    return _store_and_enqueue(
        services,
        problem=problem,
        source=source,
        user_id=user_id,
        client=client,
        external_id=external_id,
        callback_url=callback_url,
        idempotency=idempotency,
    )


def _idempotency_of(
    owner_key: str,
    idempotency_key: str | None,
    *,
    problem: str,
    source: str,
    external_id: str | None,
    callback_url: str | None,
) -> Idempotency | None:
    """What is stored with a submission made with `idempotency_key` (None without one): the
    owner, the key and the request's fingerprint."""
    if idempotency_key is None:
        return None
    return Idempotency(
        owner=owner_key[:160],
        key=idempotency_key,
        request_sha256=request_fingerprint(
            problem=problem, source=source, external_id=external_id, callback_url=callback_url
        ),
    )


def _check_text(*, problem: str, source: str, external_id: str | None, callback_url: str | None) -> None:
    """Refuses a NUL or a lone surrogate in any text, first: no message may quote such text, and
    nothing is counted for it (INVALID)."""
    for field, value in (
        ("problem", problem),
        ("source", source),
        ("external_id", external_id),
        ("callback_url", callback_url),
    ):
        reason = unstorable_reason(value) if value is not None else None
        if reason is not None:  # checked first: no message below may quote such text, nothing is counted
            raise SubmitError(Refusal.INVALID, f"{field} contains {reason}; send UTF-8 text without it")


def _check_fields(services: SubmitParts, *, source: str, external_id: str | None, callback_url: str | None) -> None:
    """Refuses an empty source, ids and URLs of the wrong length (INVALID) and a source over the
    size limit (TOO_LARGE)."""
    settings = services.settings
    if not source.strip():
        raise SubmitError(Refusal.INVALID, "the source is empty")
    if external_id is not None and not 1 <= len(external_id) <= MAX_EXTERNAL_ID_CHARS:
        raise SubmitError(Refusal.INVALID, f"external_id must have 1 to {MAX_EXTERNAL_ID_CHARS} characters")
    if callback_url is not None and not 1 <= len(callback_url) <= MAX_CALLBACK_URL_CHARS:
        raise SubmitError(Refusal.INVALID, f"callback_url must have 1 to {MAX_CALLBACK_URL_CHARS} characters")
    size = len(source.encode("utf-8"))
    if size > settings.max_source_bytes:
        raise SubmitError(
            Refusal.TOO_LARGE, f"the source is {size:,} bytes; the limit is {settings.max_source_bytes:,} bytes"
        )


def _check_target(
    services: SubmitParts,
    *,
    problem: str,
    client: ApiClientRecord | None,
    callback_url: str | None,
    unpublished_too: bool,
) -> None:
    """Refuses an unknown (or, unless `unpublished_too`, unpublished) problem (UNKNOWN_PROBLEM),
    one outside the client's scope (OUT_OF_SCOPE), and a callback URL without a client or outside
    its allowed prefixes (INVALID)."""
    try:
        if not problem or len(problem) > 64:
            raise KeyError(problem)
        if not unpublished_too and not services.problems.is_published(problem):
            raise KeyError(problem)
        services.problems.get(problem)
    except (KeyError, ProblemError):
        raise SubmitError(Refusal.UNKNOWN_PROBLEM, f"no problem {problem!r}") from None
    if client is not None and client.problem_scope is not None and problem not in client.problem_scope:
        raise SubmitError(
            Refusal.OUT_OF_SCOPE,
            f"this API client may not submit to {problem!r} (its problems: "
            f"{', '.join(client.problem_scope) or 'none'})",
        )
    if callback_url is not None:
        if client is None:
            raise SubmitError(
                Refusal.INVALID, "callback_url needs an API client (its callback secret signs the callback)"
            )
        if allowed_prefix(callback_url, client.callback_prefixes) is None:
            raise SubmitError(
                Refusal.INVALID,
                f"callback_url {callback_url!r} is not under this client's allowed callback "
                f"prefixes ({', '.join(client.callback_prefixes) or 'none'})",
            )


def _admit(services: SubmitParts, owner_key: str) -> None:
    """Admission control: the caller's rate limit (RATE_LIMITED), the queue's depth and, scaled
    out, whether Redis answers (UNAVAILABLE). A database fault propagates."""
    try:
        services.admission.check(owner_key)
        if services.redis_jobs is not None and not services.redis_jobs.available():
            raise Rejected(
                Refusal.UNAVAILABLE,
                "the grading queue is unavailable right now; nothing was stored, try again in a few seconds",
                5,
                "queue_unavailable",
            )
    except Rejected as rejected:
        if rejected.reason == "queue_unavailable":
            metrics.REJECTED.labels(reason="queue_unavailable").inc()
        raise SubmitError(rejected.refusal, rejected.message, rejected.retry_after_s) from None
    except SubmitError:
        raise
    except Exception as exc:  # the rate-limit storage (Redis) is unreachable, or the database
        if is_database_fault(exc):  # the queue-depth count: a 503 that names the database (the app's handler)
            raise
        log.warning("admission control failed: %s", exc)

        metrics.REJECTED.labels(reason="queue_unavailable").inc()
        raise SubmitError(
            Refusal.UNAVAILABLE,
            "the grading queue is unavailable right now; nothing was stored, try again in a few seconds",
            5,
        ) from None


def _store_and_enqueue(
    services: SubmitParts,
    *,
    problem: str,
    source: str,
    user_id: int | None,
    client: ApiClientRecord | None,
    external_id: str | None,
    callback_url: str | None,
    idempotency: Idempotency | None,
) -> SubmissionRecord:
    """Stores the submission (with its idempotency key, in one transaction), then enqueues it; a
    concurrent repeat of the same key answers the first one stored (or IN_PROGRESS)."""
    try:
        record = services.submissions.create(
            problem=problem,
            source=source,
            user_id=user_id,
            client_id=client.id if client is not None else None,
            external_id=external_id,
            callback_url=callback_url,
            idempotency=idempotency,
        )
    except IdempotencyKeyTaken:  # a concurrent repeat stored it first
        assert idempotency is not None
        stored = _replay(services, idempotency)
        if stored is None:
            raise SubmitError(
                Refusal.IN_PROGRESS, "a request with this Idempotency-Key is being stored; repeat it in a moment", 1
            ) from None
        return stored
    try:
        services.jobs.put(record.id)
    except Exception as exc:  # noqa: BLE001 - stored: the sweeper enqueues it when the queue is back
        log.warning("submission %s stored but not enqueued (%s); it will be enqueued later", record.id, exc)
        return record
    try:
        services.submissions.mark_enqueued(record.id)
    except Exception as exc:  # noqa: BLE001 - enqueued; the sweeper may enqueue it once more, which grades it once still
        log.warning("submission %s enqueued, but recording that failed (%s)", record.id, exc)
    return record


def _replay(services: SubmitParts, idempotency: Idempotency) -> SubmissionRecord | None:
    """The submission stored for this owner's key, if any (a repeat).

    Raises:
        SubmitError(Refusal.INVALID): the key was used for another request.
    """
    found = services.submissions.by_idempotency_key(idempotency.owner, idempotency.key)
    if found is None:
        return None
    fingerprint, record = found
    if fingerprint != idempotency.request_sha256:
        raise SubmitError(
            Refusal.INVALID,
            "this Idempotency-Key was used for another request (another problem, source, "
            "external_id or callback_url) in the last 24 hours; use a new key for a new request",
        )
    return record
