"""The submissions tables (`SubmissionRecord`, `IdempotencyKey`), their states and the values the
submission stores exchange. The stores, one per concern, share one engine (`Sessions`):
`intake` (storing and reading submissions), `leases` (workers' claims), `outbox` (API clients'
callbacks), `reports` (lists and counts for pages and health). See `server.store.db` for the
rules every write follows.
"""

from __future__ import annotations

import enum
import re
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
    or_,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.store.db import Base, UTCDateTime, enum_column, utcnow


class SubmissionStatus(enum.StrEnum):
    """Where a submission is: queued (stored, waiting for a worker), running (claimed by a
    worker), done (verdict stored), failed (not graded, and not graded again by itself: grading
    failed `max_attempts` times and an INTERNAL_ERROR verdict is stored, or its problem was refused
    when it was graded and no verdict is stored, `server.grading.grader.not_served_report`)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


FINISHED = (SubmissionStatus.DONE, SubmissionStatus.FAILED)


SUBMISSION_ID = re.compile(
    r"^[0-9a-f]{32}$"
)  # what `SubmissionIntake.create` makes (uuid4().hex): any other id is unknown


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
    status: Mapped[SubmissionStatus] = mapped_column(enum_column(SubmissionStatus, "submission_status"), index=True)
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
        enum_column(CallbackStatus, "callback_status"), nullable=True
    )
    callback_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    callback_last_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    callback_last_error: Mapped[str | None] = mapped_column(String(300), nullable=True)
    callback_next_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # what teachers group by (server/problems/clusters.py): the policy's fingerprint (graders/insight.py)
    # and the exported programs' digest blind to names (graders/verifier/verify.py `program_digest`)
    policy_fingerprint: Mapped[str | None] = mapped_column(String(16), nullable=True)
    program_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)

    __table_args__ = (
        Index("ix_submissions_client_external", "client_id", "external_id"),
        Index("ix_submissions_problem_fingerprint", "problem", "policy_fingerprint"),
    )


def lease_expired(now: datetime) -> ColumnElement[bool]:
    """A "running" claim nobody holds any more: its lease ran out, or it has none (a submission
    left running by a version of the judge before leases)."""
    return or_(SubmissionRecord.lease_expires_at.is_(None), SubmissionRecord.lease_expires_at < now)


@dataclass(frozen=True)
class Claim:
    """The outcome of `LeaseStore.claim`.

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
    """What `SubmissionIntake.create` records with a submission: who sent the key, the key, and
    the SHA-256 of the request it stands for."""

    owner: str
    key: str
    request_sha256: str


class IdempotencyKeyTaken(Exception):
    """Another submission already holds this owner's key (a concurrent repeat): nothing stored."""


class Sessions:
    """What every submission store holds: sessions on one engine (`expire_on_commit=False`, so
    rows read stay usable after their session). Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)
