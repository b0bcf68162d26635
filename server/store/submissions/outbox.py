"""The callback outbox: API clients' callbacks, pending until their verdict is stored, claimed
by one sender at a time and recorded per attempt (`server.submissions.callback_sender`)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update

from server.store.db import rowcount, utcnow
from server.store.submissions.records import CallbackStatus, Sessions, SubmissionRecord


class CallbackOutbox(Sessions):
    """The callbacks of submissions made with a `callback_url`."""

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
