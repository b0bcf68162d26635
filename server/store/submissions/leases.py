"""Workers' claims on submissions: claiming with a lease, renewing it, storing the verdict
while the claim holds, and what the sweeper must enqueue again (`server.grading.grader`, `server.grading.sweeper`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import ColumnElement, and_, or_, select, update

from server.store.db import rowcount, utcnow
from server.store.submissions.records import (
    FINISHED,
    Claim,
    Sessions,
    SubmissionRecord,
    SubmissionStatus,
    lease_expired,
)


class Unclaimed(NamedTuple):
    """A submission no worker holds (`LeaseStore.unclaimed`): "queued", or "running" whose lease
    expired (`expired`: its grading's worker died)."""

    id: str
    created_at: datetime
    expired: bool


def _unclaimed(now: datetime) -> ColumnElement[bool]:
    """ "queued", or "running" with a lease nobody holds any more."""
    return or_(
        SubmissionRecord.status == SubmissionStatus.QUEUED,
        and_(SubmissionRecord.status == SubmissionStatus.RUNNING, lease_expired(now)),
    )


class LeaseStore(Sessions):
    """Claims, leases and verdicts of the grading runtime."""

    def claim(self, submission_id: str, *, worker_id: str, lease_s: float, max_attempts: int) -> Claim:
        """Takes the submission for grading: one conditional UPDATE from "queued", or from
        "running" whose lease has expired, to "running" with attempts + 1, this worker's id and a
        lease of `lease_s` seconds. Two workers delivered the same job: one wins, the other gets
        `Claim(None, "held")`. A claim that would be attempt `max_attempts + 1` instead marks the
        submission "failed" (`fail`'s report is the caller's to store) and returns "exhausted".
        """
        now = utcnow()
        claimable = and_(
            SubmissionRecord.id == submission_id,
            or_(
                SubmissionRecord.status == SubmissionStatus.QUEUED,
                and_(SubmissionRecord.status == SubmissionStatus.RUNNING, lease_expired(now)),
            ),
        )
        with self._sessions.begin() as session:
            claimed = session.execute(
                update(SubmissionRecord)
                .where(claimable, SubmissionRecord.attempts < max_attempts)
                .values(
                    status=SubmissionStatus.RUNNING,
                    attempts=SubmissionRecord.attempts + 1,
                    started_at=now,
                    worker_id=worker_id,
                    lease_expires_at=now + timedelta(seconds=lease_s),
                )
                .execution_options(synchronize_session=False)
            )
            if rowcount(claimed) == 1:
                return Claim(session.get(SubmissionRecord, submission_id))
            exhausted = session.execute(
                update(SubmissionRecord)
                .where(claimable, SubmissionRecord.attempts >= max_attempts)
                .values(
                    status=SubmissionStatus.RUNNING,
                    worker_id=worker_id,
                    started_at=now,
                    lease_expires_at=now + timedelta(seconds=lease_s),
                )
                .execution_options(synchronize_session=False)
            )
            if rowcount(exhausted) == 1:
                return Claim(None, "exhausted")
            record = session.get(SubmissionRecord, submission_id)
        if record is None:
            return Claim(None, "unknown")
        return Claim(None, "finished" if record.status in FINISHED else "held")

    def renew_leases(self, submission_ids: list[str], *, worker_id: str, lease_s: float) -> int:
        """Extends the leases this worker holds on `submission_ids`; returns how many it still holds."""
        if not submission_ids:
            return 0
        with self._sessions.begin() as session:
            result = session.execute(
                update(SubmissionRecord)
                .where(
                    SubmissionRecord.id.in_(submission_ids),
                    SubmissionRecord.status == SubmissionStatus.RUNNING,
                    SubmissionRecord.worker_id == worker_id,
                )
                .values(lease_expires_at=utcnow() + timedelta(seconds=lease_s))
                .execution_options(synchronize_session=False)
            )
            return rowcount(result)

    def finish(
        self,
        submission_id: str,
        *,
        verdict: str | None,
        score: float | None,
        problem_version: str | None,
        result_json: str,
        worker_id: str | None = None,
        status: SubmissionStatus = SubmissionStatus.DONE,
        policy_fingerprint: str | None = None,
        program_digest: str | None = None,
    ) -> bool:
        """Stores the verdict and sets `status` ("done", or "failed" after the last attempt, or
        without a verdict or score when its problem was refused), only while the submission is
        "running" and, when `worker_id` is given, claimed by that worker (a worker whose claim was
        taken over stores nothing). Returns whether it was stored."""
        conditions = [SubmissionRecord.id == submission_id, SubmissionRecord.status == SubmissionStatus.RUNNING]
        if worker_id is not None:
            conditions.append(SubmissionRecord.worker_id == worker_id)
        with self._sessions.begin() as session:
            result = session.execute(
                update(SubmissionRecord)
                .where(*conditions)
                .values(
                    status=status,
                    verdict=verdict,
                    score=score,
                    problem_version=problem_version,
                    result_json=result_json,
                    finished_at=utcnow(),
                    lease_expires_at=None,
                    policy_fingerprint=policy_fingerprint,
                    program_digest=program_digest,
                )
                .execution_options(synchronize_session=False)
            )
            return rowcount(result) == 1

    def release_all(self) -> None:
        """Makes every "running" claim claimable now (embedded mode, at start-up: this process is
        the only worker, so whatever was running belonged to a process that is gone)."""
        with self._sessions.begin() as session:
            session.execute(
                update(SubmissionRecord)
                .where(SubmissionRecord.status == SubmissionStatus.RUNNING)
                .values(status=SubmissionStatus.QUEUED, lease_expires_at=None, worker_id=None)
                .execution_options(synchronize_session=False)
            )

    def stale_queued(self, *, older_than_s: float, limit: int = 500) -> list[str]:
        """Ids "queued" whose job was enqueued more than `older_than_s` ago and that still wait,
        oldest first: their message may be gone (a queue that lost it), and only the queue can
        say whether it holds them (`server.grading.sweeper.Sweeper`)."""
        with self._sessions() as session:
            return list(
                session.execute(
                    select(SubmissionRecord.id)
                    .where(
                        SubmissionRecord.status == SubmissionStatus.QUEUED,
                        SubmissionRecord.enqueued_at < utcnow() - timedelta(seconds=older_than_s),
                    )
                    .order_by(SubmissionRecord.created_at)
                    .limit(limit)
                ).scalars()
            )

    def to_enqueue(self, *, older_than_s: float = 0.0, limit: int = 500) -> list[str]:
        """Ids whose job must be (re)enqueued, oldest first: "queued" ones the job queue never
        accepted (stored `older_than_s` ago or more), and "running" ones whose lease expired and
        that were not enqueued again since (`mark_enqueued` after enqueueing them)."""
        return [i for i, _ in self.to_enqueue_kinds(older_than_s=older_than_s, limit=limit)]

    def to_enqueue_kinds(self, *, older_than_s: float = 0.0, limit: int = 500) -> list[tuple[str, bool]]:
        """`to_enqueue`, each id with whether it is an expired claim (a grading whose worker died,
        True) rather than a job the queue never accepted (False)."""
        now = utcnow()
        with self._sessions() as session:
            rows = session.execute(
                select(SubmissionRecord.id, SubmissionRecord.status == SubmissionStatus.RUNNING)
                .where(
                    or_(
                        and_(
                            SubmissionRecord.status == SubmissionStatus.QUEUED,
                            SubmissionRecord.enqueued_at.is_(None),
                            SubmissionRecord.created_at <= now - timedelta(seconds=older_than_s),
                        ),
                        and_(
                            SubmissionRecord.status == SubmissionStatus.RUNNING,
                            lease_expired(now),
                            or_(
                                SubmissionRecord.enqueued_at.is_(None),
                                SubmissionRecord.lease_expires_at.is_(None),
                                SubmissionRecord.enqueued_at < SubmissionRecord.lease_expires_at,
                            ),
                        ),
                    )
                )
                .order_by(SubmissionRecord.created_at)
                .limit(limit)
            ).all()
            return [(submission_id, bool(running)) for submission_id, running in rows]

    def newest_unclaimed(self) -> tuple[datetime, str] | None:
        """(created_at, id) of the newest submission no worker holds ("queued", or "running" with
        an expired lease), or None: where a pass over `unclaimed` may stop, so that it ends
        however fast new submissions arrive (those are the enqueuer's)."""
        with self._sessions() as session:
            row = session.execute(
                select(SubmissionRecord.created_at, SubmissionRecord.id)
                .where(_unclaimed(utcnow()))
                .order_by(SubmissionRecord.created_at.desc(), SubmissionRecord.id.desc())
                .limit(1)
            ).first()
        return None if row is None else (row[0], row[1])

    def unclaimed(
        self, *, after: tuple[datetime, str] | None, until: tuple[datetime, str], limit: int
    ) -> list[Unclaimed]:
        """One page of the submissions no worker holds, in (created_at, id) order: those after
        `after` (None: from the oldest) up to `until` included, at most `limit` of them. Pass the
        last one's (created_at, id) as the next page's `after`.
        """
        created, ident = SubmissionRecord.created_at, SubmissionRecord.id
        now = utcnow()
        conditions = [
            _unclaimed(now),
            or_(created < until[0], and_(created == until[0], ident <= until[1])),
        ]
        if after is not None:
            conditions.append(or_(created > after[0], and_(created == after[0], ident > after[1])))
        with self._sessions() as session:
            rows = session.execute(
                select(ident, created, SubmissionRecord.status == SubmissionStatus.RUNNING)
                .where(*conditions)
                .order_by(created, ident)
                .limit(limit)
            ).all()
        return [Unclaimed(submission_id, created_at, bool(running)) for submission_id, created_at, running in rows]

    def unfinished(self) -> list[str]:
        """Ids of submissions "queued" (oldest first)."""
        with self._sessions() as session:
            rows = session.execute(
                select(SubmissionRecord.id)
                .where(SubmissionRecord.status == SubmissionStatus.QUEUED)
                .order_by(SubmissionRecord.created_at)
            ).scalars()
            return list(rows)

    def finished_among(self, submission_ids: list[str]) -> set[str]:
        """Those of `submission_ids` whose verdict is stored ("done" or "failed")."""
        if not submission_ids:
            return set()
        with self._sessions() as session:
            return set(
                session.execute(
                    select(SubmissionRecord.id).where(
                        SubmissionRecord.id.in_(submission_ids), SubmissionRecord.status.in_(FINISHED)
                    )
                ).scalars()
            )
