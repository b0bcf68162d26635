"""An assignment's grading rules, free of HTTP and database: which attempts count, the late
penalty, best or last, and what a student's standing on an assignment is.

One function (`standing`) decides a student's score for the gradebook, its CSV and the LMS grade
passback alike, from the stored verdicts as they are now: a regrade or a changed deadline changes
the score by construction, with nothing to recompute by hand.

Rules (all times UTC):
- an attempt counts when it was graded (not queued, not running, not INTERNAL_ERROR: that is the
  judge's fault, never a grade) and submitted at or after the opening time;
- late: submitted after the deadline (the student's extension, when they have one). Late rule
  "none": a late attempt earns no credit (it is still graded and shown, flagged late); "penalty":
  its score is multiplied by `1 - min(cap, per_day * days_late)`, days counted started
  (1 second late is 1 day). A grace period (minutes) moves the deadline that far: an attempt
  within it is on time, and started days count from its end (so a slow upload or a clock a
  minute off does not cost a day);
- grade rule "best" (the default): the best credited score, the earliest attempt that reached it
  giving the submission time; "last": the latest counted attempt's credited score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from server.store.courses import Attempt, GradeRule, LateRule, Policy

__all__ = [
    "DAY_S",
    "Standing",
    "credit",
    "days_late",
    "standing",
]

DAY_S = 86_400.0


@dataclass(frozen=True)
class Standing:
    """A student's standing on one assignment.

    Attributes:
        score: the grade in [0, 1] after the late rule and the grade rule; None: no counted attempt.
        attempts: counted attempts.
        solved_at: submission time of the first counted ACCEPTED, or None.
        late: the attempt that gives the grade was late.
        scoring: that attempt, or None.
        early: attempts submitted before the opening time (not counted).
    """

    score: float | None
    attempts: int
    solved_at: datetime | None
    late: bool
    scoring: Attempt | None
    early: int = 0


def days_late(submitted_at: datetime, due_at: datetime | None, grace_minutes: int = 0) -> int:
    """Started days between the deadline (moved by the grace period) and the submission: 0 when
    on time (at the deadline itself included) or without a deadline; 1 for one second late."""
    if due_at is None:
        return 0
    due_at = due_at + timedelta(minutes=grace_minutes)
    if submitted_at <= due_at:
        return 0
    return math.ceil((submitted_at - due_at).total_seconds() / DAY_S)


def credit(policy: Policy, submitted_at: datetime, due_at: datetime | None) -> float:
    """The fraction of its score an attempt submitted at `submitted_at` keeps, in [0, 1], with
    `due_at` the student's deadline (an extension, or the assignment's)."""
    late = days_late(submitted_at, due_at, policy.grace_minutes)
    if late == 0:
        return 1.0
    if policy.late_rule == LateRule.NONE:
        return 0.0
    return max(0.0, 1.0 - min(policy.penalty_cap, policy.penalty_per_day * late))


def standing(attempts: Iterable[Attempt], policy: Policy, *, extension_due_at: datetime | None = None) -> Standing:
    """The standing of one student on one assignment from their attempts (any order).

    Args:
        attempts: the student's submissions on the assignment's problem.
        policy: the assignment's rules.
        extension_due_at: the student's own deadline, replacing `policy.due_at` when given.
    """
    due_at = extension_due_at if extension_due_at is not None else policy.due_at
    counted: list[tuple[Attempt, float]] = []
    early = 0
    for attempt in sorted(attempts, key=lambda a: (a.submitted_at, a.submission_id)):
        if attempt.verdict is None or attempt.score is None or attempt.verdict == "INTERNAL_ERROR":
            continue
        if policy.opens_at is not None and attempt.submitted_at < policy.opens_at:
            early += 1
            continue
        counted.append((attempt, attempt.score * credit(policy, attempt.submitted_at, due_at)))
    if not counted:
        return Standing(score=None, attempts=0, solved_at=None, late=False, scoring=None, early=early)
    if policy.grade_rule == GradeRule.LAST:
        scoring, score = counted[-1]
    else:  # the earliest of the best: max keeps the first maximum
        scoring, score = max(counted, key=lambda pair: pair[1])
    solved = next((a.submitted_at for a, _ in counted if a.verdict == "ACCEPTED"), None)
    return Standing(
        score=round(score, 6),
        attempts=len(counted),
        solved_at=solved,
        late=days_late(scoring.submitted_at, due_at, policy.grace_minutes) > 0,
        scoring=scoring,
        early=early,
    )
