"""`PassbackStore`, the one place that reads and writes the grade passback state (migration 0005;
the table is in `server.store.lti`), and `LtiCourseGrades`, the LMS side of courses' grades.

Table `lti_grade_passbacks`: one row per (resource link, platform user) of a student's launch
that carried an AGS line item with the score scope (made or refreshed by every such launch). A
verdict of that student's judge account on the link's problem (or a change of the assignment's
rules) makes the row "pending"
(`verdict_stored`: one UPDATE, atomic per row, so concurrent verdicts are never lost); an
`server.lti.grade_sender.LtiGradeSender` claims due rows (`claim_due`: a conditional UPDATE
moves `next_at` ahead by a lease, so one sender at a time sends for a row, hence in order, even
with several worker processes), reserves the score's timestamp before its POST (`reserve`) and
records the outcome (`record`).

Statuses: idle (launched, no verdict since), pending (a score waits to be sent, or a retry),
delivered, failed (the platform refused it: 400, 409 twice, other 4xx, or retries used up),
refused (the URL may not be called, or the registration or line item is gone).

The score is computed by the sender at each send: `server.courses.rules.standing` of the
student's verdicts under the rules of the link's assignment (best by default, or last; late
penalties; extensions). `best_score`/`pending_score` keep the standing last computed (shown on
/lti/grades), with the submission that gives it (`pending_submission_id`, `pending_submitted_at`).

`pending_seq` counts verdicts: the sender records "delivered" only when no verdict came while it
was sending; otherwise the row stays pending and is due at once, so the newer score follows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import and_, case, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from server.store.courses import Course
from server.store.db import rowcount, utcnow
from server.store.lti import (
    DueScore,
    LtiGradePassback,
    LtiPlatform,
    LtiResourceLink,
    LtiUser,
    PassbackStatus,
    PassbackView,
)


class PassbackStore:
    """Reads and writes `lti_grade_passbacks`. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def launched(self, *, resource_link_id: int, issuer: str, sub: str, user_id: int) -> None:
        """Makes (or keeps) the row of a student's launch on a resource link with a line item."""
        now = utcnow()
        with self._sessions() as session:
            lti_user_id = session.execute(
                select(LtiUser.id).where(LtiUser.issuer == issuer, LtiUser.sub == sub)
            ).scalar_one()
        key = (LtiGradePassback.resource_link_id == resource_link_id, LtiGradePassback.lti_user_id == lti_user_id)
        for _ in range(2):
            with self._sessions.begin() as session:
                if rowcount(
                    session.execute(
                        update(LtiGradePassback)
                        .where(*key)
                        .values(user_id=user_id, updated_at=now)
                        .execution_options(synchronize_session=False)
                    )
                ):
                    return
            try:
                with self._sessions.begin() as session:
                    session.add(
                        LtiGradePassback(
                            resource_link_id=resource_link_id,
                            lti_user_id=lti_user_id,
                            user_id=user_id,
                            status=PassbackStatus.IDLE,
                            pending_seq=0,
                            attempts=0,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                return
            except IntegrityError:  # a concurrent launch made it: update it
                continue

    def verdict_stored(self, *, user_id: int, problem: str) -> int:
        """A verdict of `user_id` on `problem` was stored: every row of that account on a link of
        that problem becomes pending, due now. One UPDATE. The score itself is computed by the
        sender when it sends (`server.courses.rules.standing` of the verdicts as they are then),
        so concurrent verdicts, regrades and rule changes can never leave a stale score pending.
        A row a sender holds (pending, `next_at` ahead) keeps its `next_at`: the sender sees the
        new `pending_seq` when it records its outcome and makes the row due then.

        Returns:
            How many rows became pending (0 for an account without launches).
        """
        links = select(LtiResourceLink.id).where(LtiResourceLink.problem == problem).scalar_subquery()
        return self._make_pending(LtiGradePassback.user_id == user_id, LtiGradePassback.resource_link_id.in_(links))

    def links_of(self, course: Course, problem: str) -> list[int]:
        """The resource links of `course`'s LMS context that open `problem` (none for a course
        without a context)."""
        if course.platform_id is None or course.context_id is None:
            return []
        link = LtiResourceLink
        with self._sessions() as session:
            return list(
                session.execute(
                    select(link.id).where(
                        link.platform_id == course.platform_id,
                        link.deployment_id == course.deployment_id,
                        link.context_id == course.context_id,
                        link.problem == problem,
                    )
                ).scalars()
            )

    def standings_changed(self, *, link_ids: list[int], user_id: int | None = None) -> int:
        """The rules of these links' assignment changed (deadline, late rule, grade rule, an
        extension of `user_id`): their rows that were ever graded become pending, so the sender
        recomputes and sends what changed. Returns how many."""
        if not link_ids:
            return 0
        t = LtiGradePassback
        conditions = [t.resource_link_id.in_(link_ids), t.status != PassbackStatus.IDLE]
        if user_id is not None:
            conditions.append(t.user_id == user_id)
        return self._make_pending(*conditions)

    def send_undelivered_again(self, platform_id: int | None = None) -> int:
        """Rows `failed` or `refused` (of one platform, or all) become pending, due now: after an
        administrator fixed what was said (an allowed network, a registration). Returns how many."""
        t = LtiGradePassback
        conditions = [t.status.in_([PassbackStatus.FAILED, PassbackStatus.REFUSED])]
        if platform_id is not None:
            links = select(LtiResourceLink.id).where(LtiResourceLink.platform_id == platform_id).scalar_subquery()
            conditions.append(t.resource_link_id.in_(links))
        return self._make_pending(*conditions)

    def _make_pending(self, *conditions) -> int:
        now = utcnow()
        t = LtiGradePassback
        with self._sessions.begin() as session:
            return rowcount(
                session.execute(
                    update(t)
                    .where(*conditions)
                    .values(
                        pending_verdict_at=now,
                        pending_seq=t.pending_seq + 1,
                        attempts=0,
                        next_at=case((and_(t.status == PassbackStatus.PENDING, t.next_at > now), t.next_at), else_=now),
                        status=PassbackStatus.PENDING,
                        updated_at=now,
                    )
                    .execution_options(synchronize_session=False)
                )
            )

    def claim_due(self, *, lease_s: float, limit: int = 20) -> list[DueScore]:
        """Pending rows whose time has come, each claimed by one conditional UPDATE that moves its
        `next_at` `lease_s` ahead (if the sender dies, the row is due again after the lease)."""
        now = utcnow()
        t = LtiGradePassback
        with self._sessions() as session:
            due = list(
                session.execute(
                    select(t.id, t.next_at)
                    .where(t.status == PassbackStatus.PENDING, t.next_at <= now)
                    .order_by(t.next_at)
                    .limit(limit)
                ).all()
            )
        claimed = []
        for row_id, next_at in due:
            with self._sessions.begin() as session:
                taken = session.execute(
                    update(t)
                    .where(t.id == row_id, t.status == PassbackStatus.PENDING, t.next_at == next_at)
                    .values(next_at=now + timedelta(seconds=lease_s))
                    .execution_options(synchronize_session=False)
                )
                if rowcount(taken) != 1:
                    continue
                row = session.get(t, row_id)
                assert row is not None
                link = session.get(LtiResourceLink, row.resource_link_id)
                lti_user = session.get(LtiUser, row.lti_user_id)
                platform = session.get(LtiPlatform, link.platform_id) if link is not None else None
                claimed.append(
                    DueScore(
                        id=row.id,
                        seq=row.pending_seq,
                        user_id=row.user_id,
                        link=link,
                        verdict_at=row.pending_verdict_at,
                        last_sent_score=row.last_sent_score,
                        last_sent_timestamp=row.last_sent_timestamp,
                        reserved_timestamp=row.reserved_timestamp,
                        attempts=row.attempts,
                        last_code=row.last_code,
                        sub=lti_user.sub if lti_user else None,
                        lineitem=link.ags_lineitem if link else None,
                        platform=platform,
                    )
                )
        return claimed

    def reserve(self, row_id: int, timestamp: datetime) -> None:
        """Writes the timestamp of the POST about to be made (before it is made: if this sender
        dies after the platform stored it, the next one sends a newer timestamp)."""
        with self._sessions.begin() as session:
            session.execute(
                update(LtiGradePassback)
                .where(LtiGradePassback.id == row_id)
                .values(reserved_timestamp=timestamp)
                .execution_options(synchronize_session=False)
            )

    def record(
        self,
        due: DueScore,
        *,
        status: PassbackStatus,
        code: int | None,
        error: str | None,
        next_at: datetime | None,
        sent_score: float | None = None,
        sent_timestamp: datetime | None = None,
        counted: bool = True,
        score: float | None = None,
        submission_id: str | None = None,
        submitted_at: datetime | None = None,
    ) -> bool:
        """Records the outcome of sending `due` (claimed). When a verdict came meanwhile
        (`pending_seq` moved on), the row stays pending and due now (at `next_at` when that is a
        retry), so the newer score is sent next.

        Returns:
            True when a newer verdict is waiting (the caller should look for due rows again).
        """
        t = LtiGradePassback
        now = utcnow()
        values: dict = dict(last_code=code, last_error=(error or None) and error[:300], updated_at=now)
        if counted:
            values["attempts"] = t.attempts + 1
        if score is not None:  # the standing computed for this send
            values.update(
                best_score=score,
                pending_score=score,
                pending_submission_id=submission_id,
                pending_submitted_at=submitted_at,
            )
        if sent_timestamp is not None:
            values.update(last_sent_score=sent_score, last_sent_timestamp=sent_timestamp, attempts=0)
        with self._sessions.begin() as session:
            same = rowcount(
                session.execute(
                    update(t)
                    .where(t.id == due.id, t.pending_seq == due.seq)
                    .values(status=status, next_at=next_at, **values)
                    .execution_options(synchronize_session=False)
                )
            )
            if same:
                return False
            later = next_at if status == PassbackStatus.PENDING and next_at is not None else now
            session.execute(
                update(t)
                .where(t.id == due.id)
                .values(status=PassbackStatus.PENDING, next_at=later, **values)
                .execution_options(synchronize_session=False)
            )
            return True

    def undelivered_in_course(
        self, *, platform_id: int, deployment_id: str, context_id: str
    ) -> dict[tuple[int, str], tuple[str, str]]:
        """The course's grades that did not reach the LMS: {(user id, problem): (status, the
        platform's or the judge's reason)} for rows `failed` or `refused` on the course's links
        (an LMS context: platform, deployment, context id). Shown to the course's staff on the
        gradebook, so a grade that never arrives is seen where grades are looked at."""
        t = LtiGradePassback
        query = (
            select(t.user_id, LtiResourceLink.problem, t.status, t.last_error)
            .join(LtiResourceLink, LtiResourceLink.id == t.resource_link_id)
            .where(
                LtiResourceLink.platform_id == platform_id,
                LtiResourceLink.deployment_id == deployment_id,
                LtiResourceLink.context_id == context_id,
                t.status.in_([PassbackStatus.FAILED, PassbackStatus.REFUSED]),
            )
            .order_by(t.updated_at)
        )
        with self._sessions() as session:
            return {
                (user_id, problem): (str(status), error or "no reason given")
                for user_id, problem, status, error in session.execute(query).all()
            }

    def rows(self, limit: int = 500) -> list[PassbackView]:
        """Every row (newest change first), for instructors."""
        t = LtiGradePassback
        query = (
            select(t, LtiResourceLink, LtiUser, LtiPlatform.issuer)
            .join(LtiResourceLink, LtiResourceLink.id == t.resource_link_id)
            .join(LtiUser, LtiUser.id == t.lti_user_id)
            .join(LtiPlatform, LtiPlatform.id == LtiResourceLink.platform_id)
            .order_by(t.updated_at.desc(), t.id.desc())
            .limit(limit)
        )
        with self._sessions() as session:
            return [
                PassbackView(
                    issuer=issuer,
                    context_id=link.context_id,
                    link_title=link.title,
                    problem=link.problem,
                    sub=user.sub,
                    name=user.name,
                    best_score=row.best_score,
                    last_sent_score=row.last_sent_score,
                    last_sent_timestamp=row.last_sent_timestamp,
                    status=str(row.status),
                    attempts=row.attempts,
                    last_code=row.last_code,
                    last_error=row.last_error,
                    updated_at=row.updated_at,
                )
                for row, link, user, issuer in session.execute(query).all()
            ]


class LtiCourseGrades:
    """`server.store.lms_grades.LmsGrades` for LMS courses: a course made by launches has an LMS context
    (platform, deployment, context id), whose resource links that open a problem carry its
    students' passback rows. A course without a context has no LMS grades."""

    def __init__(self, passbacks: PassbackStore):
        self.store = passbacks

    def standings_changed(self, course: Course, problem: str, user_id: int | None = None) -> int:
        return self.store.standings_changed(link_ids=self.store.links_of(course, problem), user_id=user_id)

    def undelivered(self, course: Course) -> dict[tuple[int, str], tuple[str, str]]:
        if course.platform_id is None or course.deployment_id is None or course.context_id is None:
            return {}
        return self.store.undelivered_in_course(
            platform_id=course.platform_id, deployment_id=course.deployment_id, context_id=course.context_id
        )
