"""Delivering callbacks from the grading processes, off the grading path.

Each grading process (the embedded server, every `remat-judge worker`) runs one `CallbackSender`:
a thread that claims due callbacks from the database (`SubmissionStore.claim_due_callbacks`, so
one sender delivers each attempt) and hands each to a small pool of delivery threads
(`server.delivery.callbacks.deliver`: one signed POST, time-limited). A dead or slow receiver holds a
delivery thread for at most `callback_timeout_s`, never a grading thread. Retries are scheduled in
the database (`callback_next_at`, exponential backoff), so they survive restarts; each attempt
is counted and its outcome shown to the client in the submission's `callback` field.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from server.delivery.callbacks import backoff_s, deliver
from server.delivery.senders import DueSender
from server.platform.logs import submission_context
from server.store.accounts import ClientStore
from server.store.db import utcnow
from server.store.submissions import CallbackStatus, SubmissionRecord, SubmissionStore
from server.submissions.public import public_submission

log = logging.getLogger(__name__)


class CallbackSender(DueSender):
    """Sends due callbacks (see the module docstring).

    Args:
        store, clients: the database.
        max_attempts: deliveries before a callback is marked failed; timeout_s: per delivery.
        poll_s: how often the database is asked for due callbacks (`kick` wakes it at once).
        threads: deliveries in flight at once.
    """

    def __init__(
        self,
        store: SubmissionStore,
        clients: ClientStore,
        *,
        max_attempts: int,
        timeout_s: float,
        poll_s: float = 1.0,
        threads: int = 4,
    ):
        super().__init__(name="remat-callbacks", poll_s=poll_s, threads=threads)
        self.store, self.clients = store, clients
        self.max_attempts, self.timeout_s = max_attempts, timeout_s

    def claim(self) -> list[SubmissionRecord]:
        return self.store.claim_due_callbacks(lease_s=self.timeout_s + 30)

    def deliver(self, row: SubmissionRecord) -> None:
        self.send(row)

    def send(self, record: SubmissionRecord) -> CallbackStatus:
        """One delivery attempt for `record` (claimed), recorded in the database."""
        with submission_context(record.id):
            try:
                client = self.clients.get(record.client_id) if record.client_id is not None else None
                if client is None or not record.callback_url:
                    self.store.record_callback(
                        record.id,
                        status=CallbackStatus.REFUSED,
                        code=None,
                        error="the submission has no API client",
                        next_at=None,
                    )
                    return CallbackStatus.REFUSED
                if client.revoked_at is not None:  # a revoked client gets nothing more, regrades included
                    self.store.record_callback(
                        record.id,
                        status=CallbackStatus.REFUSED,
                        code=None,
                        error="the API client was revoked",
                        next_at=None,
                    )
                    return CallbackStatus.REFUSED
                body = json.dumps(public_submission(record).model_dump(mode="json")).encode("utf-8")
                attempt = deliver(
                    record.callback_url,
                    body,
                    client.callback_secret,
                    client.callback_prefixes,
                    timeout_s=self.timeout_s,
                )
                number = record.callback_attempts + 1
                next_at = None
                if attempt.delivered:
                    outcome = CallbackStatus.DELIVERED
                elif attempt.retry and number < self.max_attempts:
                    outcome = CallbackStatus.PENDING
                    next_at = utcnow() + timedelta(seconds=backoff_s(number))
                elif attempt.status_code is None and not attempt.retry:
                    outcome = CallbackStatus.REFUSED
                else:
                    outcome = CallbackStatus.FAILED
                self.store.record_callback(
                    record.id, status=outcome, code=attempt.status_code, error=attempt.error, next_at=next_at
                )
                log.info(
                    "callback %d of %s: %s (%s)",
                    number,
                    record.id,
                    outcome.value,
                    attempt.status_code if attempt.status_code is not None else attempt.error,
                )
                return outcome
            except Exception:  # never let one callback stop the others
                log.exception("sending the callback of %s failed", record.id)
                return CallbackStatus.PENDING
