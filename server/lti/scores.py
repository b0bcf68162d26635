"""What a score passed back to an LMS is (LTI AGS 2.0): the `Score` body with its timestamps
(`iso_ms`), where it goes (`scores_url`: `<lineitem>/scores`, before the query string), the
`Delivery` a POST came to, and `next_timestamp` (a score's timestamp strictly newer, in whole
seconds, than the last one sent for the same user and line item: Moodle answers 409 otherwise).
Pure; no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

SCORE_CONTENT_TYPE = "application/vnd.ims.lis.v1.score+json"


CANVAS_SUBMISSION_CLAIM = "https://canvas.instructure.com/lti/submission"


@dataclass(frozen=True)
class Score:
    """One score for one user on one line item.

    Attributes:
        user_id: the platform's user id (the launch's `sub`).
        score_given, score_maximum: points (score_maximum > 0).
        timestamp: when the score was produced, timezone-aware (use `next_timestamp`).
        submitted_at: when the student submitted (Canvas's submission claim); None: not sent.
        comment: shown to the student by some platforms; None: not sent.
    """

    user_id: str
    score_given: float
    score_maximum: float
    timestamp: datetime
    submitted_at: datetime | None = None
    comment: str | None = None


@dataclass
class Delivery:
    """The outcome of one score POST.

    Attributes:
        status_code: the platform's status; None without an answer.
        delivered: 2xx. retry: worth retrying later (408, 429, 5xx, connection errors, time-outs).
        token_refused: 401: fetch a new token and try once more.
        error: why not delivered, short (with the platform's message for 4xx); None when delivered.
    """

    status_code: int | None
    delivered: bool
    retry: bool
    error: str | None
    token_refused: bool = False


def iso_ms(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and an explicit zone: 2026-11-23T21:30:00.123+00:00.

    Raises:
        ValueError: a naive datetime (its zone would be a guess).
    """
    if moment.tzinfo is None:
        raise ValueError("a timezone-aware datetime is required")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def _whole_second(moment: datetime) -> datetime:
    return moment.replace(microsecond=0)


def next_timestamp(verdict_time: datetime, last_sent: datetime | None) -> datetime:
    """The timestamp of the next score for one (user, line item).

    `verdict_time` itself when its whole second is after `last_sent`'s (None: nothing sent yet);
    otherwise `last_sent`'s whole second + 1 s. So the timestamps sent are strictly increasing in
    whole seconds (Moodle keeps the stored grade unless the new timestamp's second is later; it
    answers 409). A burst of verdicts within one second runs ahead of the clock by at most the
    burst's length in seconds. Both arguments timezone-aware; the result is in UTC.
    """
    if verdict_time.tzinfo is None or (last_sent is not None and last_sent.tzinfo is None):
        raise ValueError("timezone-aware datetimes are required")
    verdict_time = verdict_time.astimezone(UTC)
    if last_sent is None:
        return verdict_time
    floor = _whole_second(last_sent.astimezone(UTC))
    if _whole_second(verdict_time) > floor:
        return verdict_time
    return floor + timedelta(seconds=1)


def scores_url(lineitem_url: str) -> str:
    """`<line item path>/scores`, the query string kept (AGS 2.0 section 3.4):
    `https://m/mod/lti/services.php/2/lineitems/7/lineitem?type_id=1` ->
    `https://m/mod/lti/services.php/2/lineitems/7/lineitem/scores?type_id=1`."""
    base = lineitem_url.partition("#")[0]
    path, query_mark, query = base.partition("?")
    return f"{path.rstrip('/')}/scores{query_mark}{query}"


def score_body(score: Score) -> dict:
    """The score JSON (AGS 2.0 section 3.4.6)."""
    body: dict = {
        "userId": score.user_id,
        "scoreGiven": score.score_given,
        "scoreMaximum": score.score_maximum,
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": iso_ms(score.timestamp),
    }
    if score.comment:
        body["comment"] = score.comment
    if score.submitted_at is not None:
        body[CANVAS_SUBMISSION_CLAIM] = {"submittedAt": iso_ms(score.submitted_at)}
    return body
