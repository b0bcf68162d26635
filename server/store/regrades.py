"""Regrading every submission of a problem after its new version is published (migration 0006).

`RegradeStore.start` runs one transaction: it records the regrade (`regrades`), copies each
finished (or running) submission's verdict into `regraded_verdicts` (kept for good: what the student was told
before), and puts the submission back in the queue ("queued", attempts 0, no claim, not enqueued,
its API callback pending again). The sweeper of every grading process (embedded server or
`remat-judge worker`) enqueues rows the queue never accepted, so a regrade started from the CLI
reaches a running judge within `REMAT_JUDGE_SWEEP_INTERVAL_S`; nothing else has to be told.

When each verdict is stored, grading announces it as for any verdict: waiting pages refresh, the
API callback is sent again, and the LMS grade passback recomputes the student's standing and
sends it when it changed (with a newer timestamp: `server.lti.grade_sender`).

Submission times are never changed: deadlines and late penalties judge the time the student
submitted, not the time of the regrade.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, Text, UniqueConstraint, insert, literal, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from server.store.accounts import UserRecord
from server.store.db import Base, UTCDateTime, utcnow
from server.store.submissions import FINISHED, CallbackStatus, SubmissionRecord, SubmissionStatus


class Regrade(Base):
    """One regrade of a problem: when, by whom, to which version, how many submissions."""

    __tablename__ = "regrades"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    problem: Mapped[str] = mapped_column(String(64), index=True)
    problem_version: Mapped[str | None] = mapped_column(String(32), nullable=True)
    requested_by: Mapped[str] = mapped_column(String(254))
    submissions: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class RegradedVerdict(Base):
    """A submission's verdict before a regrade."""

    __tablename__ = "regraded_verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    regrade_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("regrades.id", name="fk_regraded_verdicts_regrade", ondelete="CASCADE"), index=True
    )
    submission_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("submissions.id", name="fk_regraded_verdicts_submission"), index=True
    )
    status: Mapped[str] = mapped_column(String(16))
    verdict: Mapped[str | None] = mapped_column(String(32), nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    problem_version: Mapped[str | None] = mapped_column(String(32), nullable=True)
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    __table_args__ = (UniqueConstraint("regrade_id", "submission_id", name="uq_regraded_verdicts_submission"),)


@dataclass(frozen=True)
class Change:
    """A submission whose verdict or score a regrade changed.

    Attributes:
        submission_id, owner: the submission and who made it (an email, "api client <name>", or "anonymous").
        old_verdict, old_score: before the regrade; new_verdict, new_score: after.
        submitted_at: the submission's own time (UTC).
    """

    submission_id: str
    owner: str
    submitted_at: datetime
    old_verdict: str | None
    old_score: float | None
    new_verdict: str | None
    new_score: float | None


@dataclass(frozen=True)
class Progress:
    """A regrade so far: `finished` of `total` submissions have their new verdict; `changes`
    lists those whose verdict or score changed."""

    regrade: Regrade
    total: int
    finished: int
    changes: list[Change]

    @property
    def done(self) -> bool:
        return self.finished >= self.total


class RegradeStore:
    """Starts regrades and reports on them. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def start(self, problem: str, *, problem_version: str | None, requested_by: str) -> Regrade:
        """Re-queues every finished or running submission of `problem`, keeping each old verdict
        (one transaction). A running one's worker may be grading it with the old version: its
        claim is gone, so `LeaseStore.finish` stores nothing for it and it is graded again.
        Queued ones are left alone: their worker loads the problem when it grades them."""
        s = SubmissionRecord
        with self._sessions.begin() as session:
            regrade = Regrade(
                problem=problem,
                problem_version=problem_version,
                requested_by=requested_by[:254],
                submissions=0,
                created_at=utcnow(),
            )
            session.add(regrade)
            session.flush()
            finished = (s.problem == problem) & s.status.in_((*FINISHED, SubmissionStatus.RUNNING))
            ids = list(session.execute(select(s.id).where(finished).with_for_update()).scalars())
            if ids:
                _keep_verdicts(session, regrade.id, ids)
                for chunk in range(0, len(ids), 500):
                    _queue_again(session, ids[chunk : chunk + 500])
            regrade.submissions = len(ids)
        return regrade

    def get(self, regrade_id: int) -> Regrade | None:
        with self._sessions() as session:
            return session.get(Regrade, regrade_id)

    def recent(self, problem: str | None = None, limit: int = 20) -> list[Regrade]:
        query = select(Regrade).order_by(Regrade.id.desc()).limit(limit)
        if problem is not None:
            query = query.where(Regrade.problem == problem)
        with self._sessions() as session:
            return list(session.execute(query).scalars())

    def progress(self, regrade_id: int) -> Progress | None:
        """How far `regrade_id` is, and what changed so far (None: no such regrade)."""
        s, old = SubmissionRecord, RegradedVerdict
        with self._sessions() as session:
            regrade = session.get(Regrade, regrade_id)
            if regrade is None:
                return None
            rows = session.execute(
                select(old, s.status, s.verdict, s.score, s.created_at, UserRecord.email, s.client_id)
                .join(s, s.id == old.submission_id)
                .outerjoin(UserRecord, UserRecord.id == s.user_id)
                .where(old.regrade_id == regrade_id)
                .order_by(s.created_at)
            ).all()
        finished, changes = 0, []
        for before, status, verdict, score, created_at, email, client_id in rows:
            if status not in FINISHED:
                continue
            finished += 1
            if before.verdict is not None and (verdict != before.verdict or score != before.score):
                owner = email or (f"API client #{client_id}" if client_id is not None else "anonymous")
                changes.append(
                    Change(
                        submission_id=before.submission_id,
                        owner=owner,
                        submitted_at=created_at,
                        old_verdict=before.verdict,
                        old_score=before.score,
                        new_verdict=verdict,
                        new_score=score,
                    )
                )
        return Progress(regrade=regrade, total=len(rows), finished=finished, changes=changes)

    def history(self, submission_id: str) -> list[RegradedVerdict]:
        """The verdicts a submission had before each regrade, oldest first."""
        with self._sessions() as session:
            return list(
                session.execute(
                    select(RegradedVerdict)
                    .where(RegradedVerdict.submission_id == submission_id)
                    .order_by(RegradedVerdict.id)
                ).scalars()
            )


def _keep_verdicts(session: Session, regrade_id: int, ids: list[str]) -> None:
    """Copies the verdicts of submissions `ids` into `regraded_verdicts` under `regrade_id`."""
    s = SubmissionRecord
    columns = [
        "regrade_id",
        "submission_id",
        "status",
        "verdict",
        "score",
        "problem_version",
        "result_json",
        "finished_at",
    ]
    session.execute(
        insert(RegradedVerdict).from_select(
            columns,
            select(
                literal(regrade_id, Integer),
                s.id,
                s.status,
                s.verdict,
                s.score,
                s.problem_version,
                s.result_json,
                s.finished_at,
            ).where(s.id.in_(ids)),
        )
    )


def _queue_again(session: Session, ids: list[str]) -> None:
    """Puts submissions `ids` back in the queue: "queued", no verdict, no claim, not enqueued, and
    their API callback (if any) pending again."""
    s = SubmissionRecord
    session.execute(
        update(s)
        .where(s.id.in_(ids))
        .values(
            status=SubmissionStatus.QUEUED,
            verdict=None,
            score=None,
            result_json=None,
            finished_at=None,
            started_at=None,
            attempts=0,
            worker_id=None,
            lease_expires_at=None,
            enqueued_at=None,
        )
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(s)
        .where(s.id.in_(ids), s.callback_url.is_not(None))
        .values(
            callback_status=CallbackStatus.PENDING,
            callback_attempts=0,
            callback_next_at=None,
            callback_last_code=None,
            callback_last_error=None,
        )
        .execution_options(synchronize_session=False)
    )
