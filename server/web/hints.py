"""Hints that open one at a time (issue 13, item 2), and the record of who opened which.

A problem's `hints.md` is split at its `## ` headings into numbered hints (text before the first
heading, such as a `# Hints` title, is dropped). A student sees hint k once it is open for them:

- by attempts: hint 1 after their first graded attempt that is not ACCEPTED, hint 2 after the
  second, and so on (`HINT_AFTER_ATTEMPTS`);
- on request: the "show the next hint" button opens the next one at once and records it
  (`hint_reveals`, migration 0007), so instructors see how many hints each student asked for;
- all of them once they have solved the problem (instructors always).

Hints opened by attempts are recorded too (reason "attempts") the first time they are shown.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.store.db import Base, UTCDateTime, _enum, utcnow

HINT_AFTER_ATTEMPTS = 1  # one more hint opens after each graded attempt that is not ACCEPTED
_HEADING = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)


class RevealReason(enum.StrEnum):
    ATTEMPTS = "attempts"
    REQUEST = "request"


class HintReveal(Base):
    """A hint a student has seen, and why it opened."""

    __tablename__ = "hint_reveals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", name="fk_hint_reveals_user"), index=True)
    problem: Mapped[str] = mapped_column(String(64))
    hint: Mapped[int] = mapped_column(Integer)
    reason: Mapped[RevealReason] = mapped_column(_enum(RevealReason, "hint_reveal_reason"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("user_id", "problem", "hint", name="uq_hint_reveals_user_problem_hint"),)


@dataclass(frozen=True)
class Hint:
    """One hint: its number (from 1), heading and Markdown body."""

    number: int
    title: str
    body: str


def split_hints(text: str) -> list[Hint]:
    """The hints of a `hints.md`: one per `## ` heading, in order; [] without any heading."""
    matches = list(_HEADING.finditer(text))
    hints = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        hints.append(Hint(number=index + 1, title=match.group(1), body=text[match.end() : end].strip()))
    return hints


def open_by_attempts(failed_attempts: int, total: int) -> int:
    """How many hints `failed_attempts` graded non-ACCEPTED attempts open (at most `total`)."""
    return max(0, min(total, failed_attempts // HINT_AFTER_ATTEMPTS))


class HintStore:
    """Reads and writes `hint_reveals`. Thread-safe: one session per call."""

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


@dataclass(frozen=True)
class HintView:
    """What the problem page shows of a problem's hints for one user.

    Attributes:
        shown: the open hints, in order, with their Markdown bodies.
        total: how many hints the problem has.
        failed_attempts: the user's graded attempts that were not ACCEPTED (nor INTERNAL_ERROR).
        requested: how many hints the user opened on request.
    """

    shown: list[Hint]
    total: int
    failed_attempts: int
    requested: int

    @property
    def next_number(self) -> int | None:
        return len(self.shown) + 1 if len(self.shown) < self.total else None


def failed_attempts(engine: Engine, user_id: int, problem: str) -> int:
    """Graded attempts of `user_id` on `problem` that were not ACCEPTED (INTERNAL_ERROR, the
    judge's fault, does not count)."""
    from server.store.submissions import SubmissionRecord

    with sessionmaker(engine)() as session:
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


def hint_view(engine: Engine, *, user_id: int, problem: str, text: str, everything: bool) -> HintView:
    """The hints `user_id` may see now (`everything`: solved, or an instructor), recording those
    that attempts opened for the first time."""
    hints = split_hints(text)
    store = HintStore(engine)
    revealed = store.revealed(user_id, problem)
    failed = failed_attempts(engine, user_id, problem)
    if everything:
        count = len(hints)
    else:
        by_attempts = open_by_attempts(failed, len(hints))
        for number in range(1, by_attempts + 1):
            if number not in revealed:
                store.reveal(user_id, problem, number, RevealReason.ATTEMPTS)
        count = max(by_attempts, max(revealed, default=0))
    requested = sum(1 for reason in revealed.values() if reason == RevealReason.REQUEST)
    return HintView(shown=hints[:count], total=len(hints), failed_attempts=failed, requested=requested)


def request_next(engine: Engine, *, user_id: int, problem: str, text: str, number: int) -> bool:
    """Opens hint `number` on request, if it is the next closed one. Returns whether it opened
    (asking twice, or for a later hint, changes nothing)."""
    view = hint_view(engine, user_id=user_id, problem=problem, text=text, everything=False)
    if view.next_number != number:
        return False
    return HintStore(engine).reveal(user_id, problem, number, RevealReason.REQUEST)
