"""Hints opened for students (`hint_reveals`, migration 0007: who saw which hint of which problem,
and whether their failed attempts or their request opened it), and `HintStore`, which reads and
writes them. When hints open is `server.web.hint_opening`'s to say."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.store.db import Base, UTCDateTime, enum_column, utcnow
from server.store.submissions import SubmissionRecord


class RevealReason(enum.StrEnum):
    """Why a hint opened for a student: their failed attempts, or their request."""

    ATTEMPTS = "attempts"
    REQUEST = "request"


class HintReveal(Base):
    """A hint a student has seen, and why it opened."""

    __tablename__ = "hint_reveals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", name="fk_hint_reveals_user"), index=True)
    problem: Mapped[str] = mapped_column(String(64))
    hint: Mapped[int] = mapped_column(Integer)
    reason: Mapped[RevealReason] = mapped_column(enum_column(RevealReason, "hint_reveal_reason"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("user_id", "problem", "hint", name="uq_hint_reveals_user_problem_hint"),)


class HintStore:
    """Reads and writes `hint_reveals`, and counts the failed attempts that open hints.
    Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def revealed(self, user_id: int, problem: str) -> dict[int, RevealReason]:
        with self._sessions() as session:
            rows = session.execute(
                select(HintReveal.hint, HintReveal.reason).where(
                    HintReveal.user_id == user_id, HintReveal.problem == problem
                )
            ).all()
        return {hint: RevealReason(reason) for hint, reason in rows}

    def reveal(self, user_id: int, problem: str, hint: int, reason: RevealReason) -> bool:
        """Records that `user_id` saw `hint` of `problem`; False when it was recorded already."""
        try:
            with self._sessions.begin() as session:
                session.add(HintReveal(user_id=user_id, problem=problem, hint=hint, reason=reason, created_at=utcnow()))
        except IntegrityError:
            return False
        return True

    def requested_counts(self, problem: str) -> dict[int, int]:
        """Per student (user id): how many hints of `problem` they asked for (reason "request")."""
        with self._sessions() as session:
            rows = session.execute(
                select(HintReveal.user_id, func.count())
                .where(HintReveal.problem == problem, HintReveal.reason == RevealReason.REQUEST)
                .group_by(HintReveal.user_id)
            ).all()
        return {user_id: count for user_id, count in rows}

    def failed_attempts(self, user_id: int, problem: str) -> int:
        """Graded attempts of `user_id` on `problem` that were not ACCEPTED (INTERNAL_ERROR, the
        judge's fault, does not count)."""
        with self._sessions() as session:
            return int(
                session.execute(
                    select(func.count()).where(
                        SubmissionRecord.user_id == user_id,
                        SubmissionRecord.problem == problem,
                        SubmissionRecord.verdict.is_not(None),
                        SubmissionRecord.verdict.not_in(("ACCEPTED", "INTERNAL_ERROR")),
                    )
                ).scalar_one()
            )
