"""Lists and counts of submissions: the pages' lists, the instructor pages' statistics, the
health check's queue depth and counts by status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, case, func, select, true

from server.store.accounts import UserRecord
from server.store.db import aware
from server.store.submissions.records import FINISHED, Sessions, SubmissionRecord, SubmissionStatus


class SubmissionReports(Sessions):
    """Reads submissions for lists and statistics (no writes)."""

    def ping(self) -> None:
        """Runs `SELECT 1`; raises what the database driver raises when it is unreachable."""
        with self._sessions() as session:
            session.execute(select(1))

    def queue_depth(self) -> int:
        """How many submissions are stored and not yet claimed ("queued")."""
        with self._sessions() as session:
            return int(
                session.execute(
                    select(func.count()).where(SubmissionRecord.status == SubmissionStatus.QUEUED)
                ).scalar_one()
            )

    def count_by_status(self) -> dict[str, int]:
        with self._sessions() as session:
            rows = session.execute(select(SubmissionRecord.status, func.count()).group_by(SubmissionRecord.status))
            return {str(status): count for status, count in rows}

    def for_user(self, user_id: int, *, problem: str | None = None, limit: int = 100) -> list[SubmissionRecord]:
        """A user's submissions, newest first."""
        query = select(SubmissionRecord).where(SubmissionRecord.user_id == user_id)
        if problem is not None:
            query = query.where(SubmissionRecord.problem == problem)
        with self._sessions() as session:
            return list(session.execute(query.order_by(SubmissionRecord.created_at.desc()).limit(limit)).scalars())

    def solved(self, user_id: int) -> set[str]:
        """Slugs of the problems the user has an ACCEPTED submission for."""
        with self._sessions() as session:
            rows = session.execute(
                select(SubmissionRecord.problem)
                .where(SubmissionRecord.user_id == user_id, SubmissionRecord.verdict == "ACCEPTED")
                .distinct()
            )
            return set(rows.scalars())

    def recent(
        self, *, problem: str | None = None, limit: int = 200, scope: ColumnElement[bool] | None = None
    ) -> list[tuple[SubmissionRecord, str | None]]:
        """The newest submissions (with the author's email, None for API ones): everyone's, or
        those matching `scope` (`server.authz.Access.submission_scope`: what a principal may read)."""
        query = select(SubmissionRecord, func.coalesce(UserRecord.contact_email, UserRecord.email)).outerjoin(
            UserRecord, SubmissionRecord.user_id == UserRecord.id
        )
        if problem is not None:
            query = query.where(SubmissionRecord.problem == problem)
        if scope is not None:
            query = query.where(scope)
        with self._sessions() as session:
            return [
                (r, email)
                for r, email in session.execute(query.order_by(SubmissionRecord.created_at.desc()).limit(limit)).all()
            ]

    def verdict_counts(self, scope: ColumnElement[bool] | None = None) -> dict[str, dict[str, int]]:
        """Per problem slug, how many submissions (those matching `scope`, else all) got each
        verdict (finished ones only)."""
        with self._sessions() as session:
            rows = session.execute(
                select(SubmissionRecord.problem, SubmissionRecord.verdict, func.count())
                .where(SubmissionRecord.status.in_(FINISHED), true() if scope is None else scope)
                .group_by(SubmissionRecord.problem, SubmissionRecord.verdict)
            )
            out: dict[str, dict[str, int]] = {}
            for slug, verdict, count in rows:
                if verdict is not None:  # a finished submission always has one
                    out.setdefault(slug, {})[verdict] = count
            return out

    def student_counts(self, scope: ColumnElement[bool] | None = None) -> dict[str, tuple[int, int]]:
        """Per problem slug: (accounts that submitted, accounts with an ACCEPTED), counting the
        submissions matching `scope` (else all). Web accounts only (API submissions have no student)."""
        s = SubmissionRecord
        with self._sessions() as session:
            rows = session.execute(
                select(
                    s.problem,
                    func.count(func.distinct(s.user_id)),
                    func.count(func.distinct(case((s.verdict == "ACCEPTED", s.user_id)))),
                )
                .where(s.user_id.is_not(None), true() if scope is None else scope)
                .group_by(s.problem)
            )
            return {slug: (int(tried), int(solved)) for slug, tried, solved in rows}

    def per_student(self, problem: str, scope: ColumnElement[bool] | None = None) -> list[StudentRow]:
        """One row per account that submitted to `problem` (submissions matching `scope`, else
        all), most attempts first."""
        s = SubmissionRecord
        with self._sessions() as session:
            rows = session.execute(
                select(
                    UserRecord.id,
                    func.coalesce(UserRecord.contact_email, UserRecord.email),
                    UserRecord.display_name,
                    func.count(s.id),
                    func.min(case((s.verdict == "ACCEPTED", s.created_at))),
                    func.max(s.score),
                    func.max(s.created_at),
                )
                .join(UserRecord, UserRecord.id == s.user_id)
                .where(s.problem == problem, true() if scope is None else scope)
                .group_by(UserRecord.id, UserRecord.email, UserRecord.contact_email, UserRecord.display_name)
                .order_by(func.count(s.id).desc(), UserRecord.email)
            ).all()
        return [
            StudentRow(
                user_id=uid,
                email=email,
                name=name,
                attempts=int(attempts),
                solved_at=aware(solved_at),
                best_score=best,
                last_at=aware(last),
            )
            for uid, email, name, attempts, solved_at, best, last in rows
        ]


@dataclass(frozen=True)
class StudentRow:
    """A student's work on one problem: attempts, first ACCEPTED (UTC) or None, best score (0-1),
    last submission time (UTC)."""

    user_id: int
    email: str
    name: str
    attempts: int
    solved_at: datetime | None
    best_score: float | None
    last_at: datetime | None
