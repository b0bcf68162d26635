"""Submissions, one store per concern on one engine: `SubmissionIntake` (storing and reading
submissions, idempotency keys), `LeaseStore` (workers' claims, leases and verdicts),
`CallbackOutbox` (API clients' callbacks) and `SubmissionReports` (lists and counts). The tables
and values they exchange are in `records`.

`SubmissionStore` is all four at once on one engine: the grading runtime (the grader, its
sweeper and the in-process pool, the callback sender) needs claims, reads, the outbox and the
queue depth together, and the composition root hands that one object to each named field of
`server.services.Services`.
"""

from __future__ import annotations

from server.store.submissions.intake import SubmissionIntake
from server.store.submissions.leases import LeaseStore
from server.store.submissions.outbox import CallbackOutbox
from server.store.submissions.records import (
    FINISHED,
    IDEMPOTENCY_TTL,
    SUBMISSION_ID,
    CallbackStatus,
    Claim,
    Idempotency,
    IdempotencyKey,
    IdempotencyKeyTaken,
    SubmissionRecord,
    SubmissionStatus,
)
from server.store.submissions.reports import StudentRow, SubmissionReports

__all__ = [
    "FINISHED",
    "IDEMPOTENCY_TTL",
    "SUBMISSION_ID",
    "CallbackOutbox",
    "CallbackStatus",
    "Claim",
    "Idempotency",
    "IdempotencyKey",
    "IdempotencyKeyTaken",
    "LeaseStore",
    "StudentRow",
    "SubmissionIntake",
    "SubmissionRecord",
    "SubmissionReports",
    "SubmissionStatus",
    "SubmissionStore",
]


class SubmissionStore(SubmissionIntake, LeaseStore, CallbackOutbox, SubmissionReports):
    """Every submission store at once, sharing one engine's sessions (see the module docstring).
    Thread-safe: one session per call."""
