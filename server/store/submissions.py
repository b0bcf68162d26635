"""Submissions (`SubmissionRecord`, `SubmissionStore`): storing, claiming with a lease, finishing,
the callback queue, idempotency keys, and the counts the instructor pages read. See
`server.store.db` for the rules every write follows.
"""

from __future__ import annotations

import enum
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    ColumnElement,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    and_,
    case,
    delete,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.store.accounts import UserRecord
from server.store.db import Base, UTCDateTime, _aware, _enum, rowcount, utcnow


class SubmissionStatus(enum.StrEnum):
    """Where a submission is: queued (stored, waiting for a worker), running (claimed by a
    worker), done (verdict stored), failed (grading failed `max_attempts` times: an INTERNAL_ERROR
    verdict is stored, and it is not graded again by itself)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


FINISHED = (SubmissionStatus.DONE, SubmissionStatus.FAILED)


SUBMISSION_ID = re.compile(
    r"^[0-9a-f]{32}$"
)  # what `SubmissionStore.create` makes (uuid4().hex): any other id is unknown


class CallbackStatus(enum.StrEnum):
    """Where a submission's callback is: pending (waiting for the verdict, or for a retry),
    delivered (a 2xx answer), failed (a 4xx or 3xx answer, or retries used up), refused (the URL
    may not be called: outside the client's allowed prefixes, or a private address)."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    REFUSED = "refused"


class SubmissionRecord(Base):
    """One stored submission. `result_json` is the verdict JSON once graded (status "done" or
    "failed"); `user_id` is set for submissions made through the web pages, None for API ones.

    Grading bookkeeping: `attempts` counts claims; `worker_id` names the worker holding the
    claim and `lease_expires_at` when another may take it over; `enqueued_at` is when the job
    queue accepted its job (None: not yet, the sweeper enqueues it).
    """

    __tablename__ = "submissions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("users.id"), nullable=True, index=True)
    problem: Mapped[str] = mapped_column(String(64), index=True)
    problem_version: Mapped[str | None] = mapped_column(String(32), nullable=True)
    source: Mapped[str] = mapped_column(Text)
    status: Mapped[SubmissionStatus] = mapped_column(_enum(SubmissionStatus, "submission_status"), index=True)
    verdict: Mapped[str | None] = mapped_column(String(32), nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    worker_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    client_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("api_clients.id", name="fk_submissions_client_id"), nullable=True
    )
    external_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    callback_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    callback_status: Mapped[CallbackStatus | None] = mapped_column(
        _enum(CallbackStatus, "callback_status"), nullable=True
    )
    callback_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    callback_last_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    callback_last_error: Mapped[str | None] = mapped_column(String(300), nullable=True)
    callback_next_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # what teachers group by (server/insight.py): the policy's fingerprint (graders/insight.py)
    # and the exported programs' digest blind to names (graders/verifier.py `program_digest`)
    policy_fingerprint: Mapped[str | None] = mapped_column(String(16), nullable=True)
    program_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)

    __table_args__ = (
        Index("ix_submissions_client_external", "client_id", "external_id"),
        Index("ix_submissions_problem_fingerprint", "problem", "policy_fingerprint"),
    )


def _lease_expired(now: datetime):
    """A "running" claim nobody holds any more: its lease ran out, or it has none (a submission
    left running by a version of the judge before leases)."""
    return or_(SubmissionRecord.lease_expires_at.is_(None), SubmissionRecord.lease_expires_at < now)


@dataclass(frozen=True)
class Claim:
    """The outcome of `SubmissionStore.claim`.

    Attributes:
        record: the submission, claimed by the caller (status "running"), or None.
        reason: when `record` is None: "unknown", "finished" (done or failed), "held" (another
            worker holds a live lease) or "exhausted" (this claim would pass `max_attempts`: the
            submission was just marked "failed").
    """

    record: SubmissionRecord | None
    reason: str = ""


IDEMPOTENCY_TTL = timedelta(hours=24)  # how long an Idempotency-Key answers with its submission


class IdempotencyKey(Base):
    """An `Idempotency-Key` a caller sent with a submission (IETF httpapi "The Idempotency-Key HTTP
    Header Field" draft): within `IDEMPOTENCY_TTL`, the same owner and key answer the submission
    stored first; `request_sha256` tells a repeat of the same request from a different one."""

    __tablename__ = "idempotency_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(160))
    key: Mapped[str] = mapped_column(String(255))
    request_sha256: Mapped[str] = mapped_column(String(64))
    submission_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)

    __table_args__ = (UniqueConstraint("owner", "key", name="uq_idempotency_keys_owner_key"),)


@dataclass(frozen=True)
class Idempotency:
    """What `SubmissionStore.create` records with a submission: who sent the key, the key, and
    the SHA-256 of the request it stands for."""

    owner: str
    key: str
    request_sha256: str


class IdempotencyKeyTaken(Exception):
    """Another submission already holds this owner's key (a concurrent repeat): nothing stored."""


class SubmissionStore:
    """All reads and writes of submissions. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create(
        self,
        *,
        problem: str,
        source: str,
        user_id: int | None = None,
        client_id: int | None = None,
        external_id: str | None = None,
        callback_url: str | None = None,
        idempotency: Idempotency | None = None,
    ) -> SubmissionRecord:
        """Stores a new submission with status "queued" (and, with a `callback_url`, a callback
        "pending" until the verdict), with its `idempotency` key in the same transaction.

        Raises:
            IdempotencyKeyTaken: the owner's key is held by another submission (stored meanwhile);
                nothing was stored.
        """
        from sqlalchemy.exc import IntegrityError

        now = utcnow()
        record = SubmissionRecord(
            id=uuid.uuid4().hex,
            problem=problem,
            source=source,
            status=SubmissionStatus.QUEUED,
            attempts=0,
            created_at=now,
            user_id=user_id,
            client_id=client_id,
            external_id=external_id,
            callback_url=callback_url,
            callback_attempts=0,
            callback_status=CallbackStatus.PENDING if callback_url else None,
        )
        try:
            with self._sessions.begin() as session:
                if idempotency is not None:  # an expired key of this owner is free again
                    session.execute(
                        delete(IdempotencyKey).where(
                            IdempotencyKey.owner == idempotency.owner,
                            IdempotencyKey.key == idempotency.key,
                            IdempotencyKey.created_at < now - IDEMPOTENCY_TTL,
                        )
                    )
                    if secrets.randbelow(200) == 0:  # now and then, every expired key
                        session.execute(delete(IdempotencyKey).where(IdempotencyKey.created_at < now - IDEMPOTENCY_TTL))
                session.add(record)
                if idempotency is not None:
                    session.add(
                        IdempotencyKey(
                            owner=idempotency.owner,
                            key=idempotency.key,
                            created_at=now,
                            request_sha256=idempotency.request_sha256,
                            submission_id=record.id,
                        )
                    )
        except IntegrityError:
            if idempotency is None:
                raise
            raise IdempotencyKeyTaken(idempotency.key) from None
        return record

    def by_idempotency_key(self, owner: str, key: str) -> tuple[str, SubmissionRecord] | None:
        """(the request's SHA-256, its submission) of `owner`'s unexpired `key`, or None."""
        with self._sessions() as session:
            found = session.execute(
                select(IdempotencyKey, SubmissionRecord)
                .join(SubmissionRecord, SubmissionRecord.id == IdempotencyKey.submission_id)
                .where(
                    IdempotencyKey.owner == owner,
                    IdempotencyKey.key == key,
                    IdempotencyKey.created_at >= utcnow() - IDEMPOTENCY_TTL,
                )
            ).first()
        return (found[0].request_sha256, found[1]) if found is not None else None

    def get_many(self, submission_ids: list[str]) -> dict[str, SubmissionRecord]:
        """The stored submissions among `submission_ids`, by id."""
        if not submission_ids:
            return {}
        with self._sessions() as session:
            rows = session.execute(select(SubmissionRecord).where(SubmissionRecord.id.in_(submission_ids))).scalars()
            return {r.id: r for r in rows}

    def for_client(self, client_id: int, *, external_id: str | None = None, limit: int = 100) -> list[SubmissionRecord]:
        """An API client's submissions, newest first; only those with `external_id` when given."""
        query = select(SubmissionRecord).where(SubmissionRecord.client_id == client_id)
        if external_id is not None:
            query = query.where(SubmissionRecord.external_id == external_id)
        with self._sessions() as session:
            return list(session.execute(query.order_by(SubmissionRecord.created_at.desc()).limit(limit)).scalars())

    # -- callbacks ----------------------------------------------------------------------------

    def callback_due_now(self, submission_id: str) -> None:
        """Makes a pending callback due (its verdict was just stored)."""
        with self._sessions.begin() as session:
            session.execute(
                update(SubmissionRecord)
                .where(SubmissionRecord.id == submission_id, SubmissionRecord.callback_status == CallbackStatus.PENDING)
                .values(callback_next_at=utcnow())
                .execution_options(synchronize_session=False)
            )

    def claim_due_callbacks(self, *, lease_s: float, limit: int = 20) -> list[SubmissionRecord]:
        """Pending callbacks whose time has come, each claimed by one conditional UPDATE that
        moves its `callback_next_at` `lease_s` seconds ahead (so one sender delivers each
        attempt; if that sender dies, the attempt is due again after the lease)."""
        now = utcnow()
        with self._sessions() as session:
            due = list(
                session.execute(
                    select(SubmissionRecord.id, SubmissionRecord.callback_next_at)
                    .where(
                        SubmissionRecord.callback_status == CallbackStatus.PENDING,
                        SubmissionRecord.callback_next_at <= now,
                    )
                    .order_by(SubmissionRecord.callback_next_at)
                    .limit(limit)
                ).all()
            )
        claimed = []
        for submission_id, next_at in due:
            with self._sessions.begin() as session:
                result = session.execute(
                    update(SubmissionRecord)
                    .where(
                        SubmissionRecord.id == submission_id,
                        SubmissionRecord.callback_status == CallbackStatus.PENDING,
                        SubmissionRecord.callback_next_at == next_at,
                    )
                    .values(callback_next_at=now + timedelta(seconds=lease_s))
                    .execution_options(synchronize_session=False)
                )
                record = session.get(SubmissionRecord, submission_id) if rowcount(result) == 1 else None
                if record is not None:
                    claimed.append(record)
        return claimed

    def record_callback(
        self,
        submission_id: str,
        *,
        status: CallbackStatus,
        code: int | None,
        error: str | None,
        next_at: datetime | None,
    ) -> None:
        """Counts one delivery attempt and its outcome (`next_at`: when to try again, or None)."""
        with self._sessions.begin() as session:
            session.execute(
                update(SubmissionRecord)
                .where(SubmissionRecord.id == submission_id)
                .values(
                    callback_attempts=SubmissionRecord.callback_attempts + 1,
                    callback_status=status,
                    callback_last_code=code,
                    callback_last_error=(error or None) and error[:300],
                    callback_next_at=next_at,
                )
                .execution_options(synchronize_session=False)
            )

    def get(self, submission_id: str) -> SubmissionRecord | None:
        with self._sessions() as session:
            return session.get(SubmissionRecord, submission_id)

    def mark_enqueued(self, submission_id: str) -> None:
        """Records that the job queue accepted the submission's job."""
        with self._sessions.begin() as session:
            session.execute(
                update(SubmissionRecord).where(SubmissionRecord.id == submission_id).values(enqueued_at=utcnow())
            )

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
                and_(SubmissionRecord.status == SubmissionStatus.RUNNING, _lease_expired(now)),
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
        verdict: str,
        score: float,
        problem_version: str | None,
        result_json: str,
        worker_id: str | None = None,
        status: SubmissionStatus = SubmissionStatus.DONE,
        policy_fingerprint: str | None = None,
        program_digest: str | None = None,
    ) -> bool:
        """Stores the verdict and sets `status` ("done", or "failed" after the last attempt), only
        while the submission is "running" and, when `worker_id` is given, claimed by that worker
        (a worker whose claim was taken over stores nothing). Returns whether it was stored."""
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
        say whether it holds them (`server.grading.grader.Sweeper`)."""
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
                            _lease_expired(now),
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
                solved_at=_aware(solved_at),
                best_score=best,
                last_at=_aware(last),
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
