"""Passing scores back to the LMS (AGS), from the grading processes, off the grading path.

Each grading process (the embedded server, every `remat-judge worker`) runs one `LtiGradeSender`,
like `server.submissions.callback_sender.CallbackSender`: a thread claims due rows of `lti_grade_passbacks`
(`PassbackStore.claim_due`: a conditional UPDATE, so one process sends for a row at a time and a
student's scores on one line item go out in order, whatever the number of workers) and hands each
to a small pool of sending threads. Each send:

1. computes the score now (`Scorer`: `server.courses.rules.standing` under the rules of the
   link's assignment), and skips the POST when it equals the one last delivered (rule "best": a
   worse attempt) or when no attempt counts yet;
2. takes the timestamp with `ags.next_timestamp(verdict time, last reserved or sent)`: strictly
   newer in whole seconds (Moodle answers 409 otherwise), and writes it (`reserved_timestamp`)
   before the POST, so a sender that dies mid-POST never makes the next one reuse it;
3. `AgsClient.send_score` (token with the tool key's client assertion, cached; 401 refetch once);
4. records: 2xx delivered; 408/429/5xx/connection errors retried with `callbacks.backoff_s` up to
   `max_attempts`; 409 once more at once (the next second), then failed; 400 and other 4xx
   failed with the platform's message; a URL that may not be called refused.

Grading never waits for any of it (`Grader._announce` runs one UPDATE and wakes this thread).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from server.courses.gradebook import standing_of
from server.courses.rules import Standing
from server.delivery.callbacks import backoff_s
from server.delivery.senders import DueSender
from server.lti.ags import AgsClient
from server.lti.keys import ToolKey, load_or_create
from server.lti.scores import Delivery, Score, next_timestamp
from server.settings import Settings
from server.store.course_store import CourseStore
from server.store.db import utcnow
from server.store.lti import DueScore, PassbackStatus
from server.store.lti_passback import PassbackStore

log = logging.getLogger(__name__)
SCORE_MAXIMUM = 1.0  # the judge's scores run from 0 to 1 (the deep-linked line item's maximum)


class Scorer:
    """What a passback row's student has earned now: their standing on the assignment of the
    row's resource link (the course of the link's LMS context and the link's problem), or under
    the default rules (best, no dates) for a link outside any course (a launch without a context)."""

    def __init__(self, courses: CourseStore):
        self.courses = courses

    def __call__(self, due: DueScore) -> Standing:
        link = due.link
        assert link is not None
        course = self.courses.course_of_link(
            platform_id=link.platform_id, deployment_id=link.deployment_id, context_id=link.context_id
        )
        assignment = self.courses.assignment(course.id, link.problem) if course is not None else None
        return standing_of(self.courses, due.user_id, link.problem, assignment)


class LtiGradeSender(DueSender):
    """Sends due scores (see the module docstring).

    Args:
        store: the passback rows.
        scorer: computes a row's score at send time (`Scorer`).
        key: the tool's key, or a callable that loads it (read at the first send: a worker needs
            the same `<data_dir>/lti_private_key.pem` as the server whose /lti/jwks the LMS knows).
        client: the AGS client (its `allow_networks` from `REMAT_JUDGE_LTI_ALLOW_NETWORKS`).
        max_attempts: POSTs of one score that may fail with a retryable error before it is failed.
        poll_s: how often the database is asked for due rows (`kick` wakes it at once).
        threads: sends in flight at once.
    """

    def __init__(
        self,
        store: PassbackStore,
        scorer: Callable[[DueScore], Standing],
        key: ToolKey | Callable[[], ToolKey],
        client: AgsClient,
        *,
        max_attempts: int = 6,
        poll_s: float = 1.0,
        threads: int = 4,
    ):
        super().__init__(name="remat-lti-grades", poll_s=poll_s, threads=threads)
        self.store, self.scorer, self.client = store, scorer, client
        self._key, self._key_lock = key, threading.Lock()
        self.max_attempts = max_attempts
        self.lease_s = 2 * client.timeout_s + 30  # a token request and a POST, with room to spare

    def key(self) -> ToolKey:
        with self._key_lock:
            if not isinstance(self._key, ToolKey):
                self._key = self._key()
            return self._key

    def verdict_stored(self, *, user_id: int | None, problem: str) -> int:
        """Makes the rows of `user_id`'s launches on `problem` pending (one UPDATE) and wakes the
        sender when there are any. Returns how many."""
        if user_id is None:
            return 0
        changed = self.store.verdict_stored(user_id=user_id, problem=problem)
        if changed:
            self.kick()
        return changed

    def claim(self) -> list[DueScore]:
        return self.store.claim_due(lease_s=self.lease_s)

    def deliver(self, row: DueScore) -> None:
        if self.send(row):
            self.kick()  # a newer verdict came during the send: it goes next

    def send(self, due: DueScore) -> bool:
        """One send of `due` (claimed), recorded. Returns True when a newer verdict is waiting."""
        if due.platform is None or due.link is None or not due.lineitem or not due.sub or due.verdict_at is None:
            return self.store.record(
                due,
                status=PassbackStatus.REFUSED,
                code=None,
                next_at=None,
                counted=False,
                error="the platform's registration or the line item is gone",
            )
        standing = self.scorer(due)
        scoring = standing.scoring
        submission_id = scoring.submission_id if scoring else None
        submitted_at = scoring.submitted_at if scoring else None
        if standing.score is None:  # no attempt counts yet (none graded, or all before the opening)
            return self.store.record(
                due, status=PassbackStatus.IDLE, code=due.last_code, error=None, next_at=None, counted=False
            )
        if due.last_sent_score is not None and standing.score == due.last_sent_score:
            return self.store.record(
                due,
                status=PassbackStatus.DELIVERED,
                code=due.last_code,
                error=None,
                next_at=None,
                counted=False,
                score=standing.score,
                submission_id=submission_id,
                submitted_at=submitted_at,
            )
        timestamp, delivery = self._post(due, standing.score, submitted_at)
        number = due.attempts + 1
        outcome, next_at = self._outcome(delivery, number, due.last_code)
        log.info(
            "LTI score %.3f for %s on %s (attempt %d): %s (%s)",
            standing.score,
            due.sub,
            due.lineitem,
            number,
            outcome.value,
            delivery.status_code if delivery.status_code is not None else delivery.error,
        )
        return self.store.record(
            due,
            status=outcome,
            code=delivery.status_code,
            error=delivery.error,
            next_at=next_at,
            sent_score=standing.score if delivery.delivered else None,
            sent_timestamp=timestamp if delivery.delivered else None,
            score=standing.score,
            submission_id=submission_id,
            submitted_at=submitted_at,
        )

    def _post(self, due: DueScore, given: float, submitted_at: datetime | None) -> tuple[datetime, Delivery]:
        """Reserves the score's timestamp (strictly newer than the last reserved or sent), then
        sends the score `given` of `due` (its platform, line item and sub present). Returns the
        timestamp and the delivery."""
        assert due.platform is not None and due.lineitem is not None and due.sub is not None
        assert due.verdict_at is not None
        floor = max((t for t in (due.last_sent_timestamp, due.reserved_timestamp) if t is not None), default=None)
        timestamp = next_timestamp(due.verdict_at, floor)
        self.store.reserve(due.id, timestamp)
        score = Score(
            user_id=due.sub,
            score_given=given * SCORE_MAXIMUM,
            score_maximum=SCORE_MAXIMUM,
            timestamp=timestamp,
            submitted_at=submitted_at,
        )
        return timestamp, self.client.send_score(due.platform, self.key(), due.lineitem, score)

    def _outcome(
        self, delivery: Delivery, number: int, last_code: int | None
    ) -> tuple[PassbackStatus, datetime | None]:
        """The row's status after attempt `number` ended in `delivery`, and when to try again."""
        if delivery.delivered:
            return PassbackStatus.DELIVERED, None
        if delivery.status_code == 409 and last_code != 409:
            return PassbackStatus.PENDING, utcnow()  # once more, with the next second
        if delivery.retry and number < self.max_attempts:
            return PassbackStatus.PENDING, utcnow() + timedelta(seconds=backoff_s(number))
        if delivery.status_code is None and not delivery.retry:
            return PassbackStatus.REFUSED, None
        return PassbackStatus.FAILED, None


def grade_sender(settings: Settings, passbacks: PassbackStore, courses: CourseStore) -> LtiGradeSender:
    """The sender of a grading process on its stores: the tool key from `<data_dir>` (loaded at the first send),
    `REMAT_JUDGE_LTI_ALLOW_NETWORKS`, and the callbacks' attempts and time-out settings
    (`REMAT_JUDGE_CALLBACK_MAX_ATTEMPTS`, `REMAT_JUDGE_CALLBACK_TIMEOUT_S`)."""
    return LtiGradeSender(
        passbacks,
        Scorer(courses),
        lambda: load_or_create(settings.data_dir),
        AgsClient(timeout_s=settings.callback_timeout_s, allow_networks=settings.lti_allow_networks),
        max_attempts=settings.callback_max_attempts,
    )
