"""Storing submissions and reading them back: the intake of the web pages and the API."""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.store.db import utcnow
from server.store.submissions.records import (
    IDEMPOTENCY_TTL,
    CallbackStatus,
    Idempotency,
    IdempotencyKey,
    IdempotencyKeyTaken,
    Sessions,
    SubmissionRecord,
    SubmissionStatus,
)


class SubmissionIntake(Sessions):
    """Stores new submissions (with their idempotency keys) and reads them by id or by owner."""

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
                session.add(record)
                if idempotency is not None:
                    _hold_key(session, idempotency, record.id, now)
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

    def get(self, submission_id: str) -> SubmissionRecord | None:
        with self._sessions() as session:
            return session.get(SubmissionRecord, submission_id)

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

    def mark_enqueued(self, submission_id: str) -> None:
        """Records that the job queue accepted the submission's job."""
        with self._sessions.begin() as session:
            session.execute(
                update(SubmissionRecord).where(SubmissionRecord.id == submission_id).values(enqueued_at=utcnow())
            )

    def mark_enqueued_many(self, submission_ids: list[str]) -> None:
        """`mark_enqueued` for each of `submission_ids`, in one UPDATE (a batch of the sweeper)."""
        if not submission_ids:
            return
        with self._sessions.begin() as session:
            session.execute(
                update(SubmissionRecord)
                .where(SubmissionRecord.id.in_(submission_ids))
                .values(enqueued_at=utcnow())
                .execution_options(synchronize_session=False)
            )


def _hold_key(session: Session, idempotency: Idempotency, submission_id: str, now: datetime) -> None:
    """Stores the owner's idempotency key for `submission_id`, after deleting that owner's expired
    row of the same key (it is free again) and, now and then, every expired key."""
    session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.owner == idempotency.owner,
            IdempotencyKey.key == idempotency.key,
            IdempotencyKey.created_at < now - IDEMPOTENCY_TTL,
        )
    )
    if secrets.randbelow(200) == 0:
        session.execute(delete(IdempotencyKey).where(IdempotencyKey.created_at < now - IDEMPOTENCY_TTL))
    session.add(
        IdempotencyKey(
            owner=idempotency.owner,
            key=idempotency.key,
            created_at=now,
            request_sha256=idempotency.request_sha256,
            submission_id=submission_id,
        )
    )
