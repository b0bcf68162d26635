"""Hints that open one at a time, and the record of who opened which (`server.store.hints`).

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

import re
from dataclasses import dataclass

from server.store.hints import HintStore, RevealReason

HINT_AFTER_ATTEMPTS = 1  # one more hint opens after each graded attempt that is not ACCEPTED
_HEADING = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)


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


def hint_view(store: HintStore, *, user_id: int, problem: str, text: str, everything: bool) -> HintView:
    """The hints `user_id` may see now (`everything`: solved, or an instructor), recording those
    that attempts opened for the first time."""
    hints = split_hints(text)
    revealed = store.revealed(user_id, problem)
    failed = store.failed_attempts(user_id, problem)
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


def request_next(store: HintStore, *, user_id: int, problem: str, text: str, number: int) -> bool:
    """Opens hint `number` on request, if it is the next closed one. Returns whether it opened
    (asking twice, or for a later hint, changes nothing)."""
    view = hint_view(store, user_id=user_id, problem=problem, text=text, everything=False)
    if view.next_number != number:
        return False
    return store.reveal(user_id, problem, number, RevealReason.REQUEST)
