"""The assignment rules (server/courses/rules.py): which attempts count, late credit, best or last."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from server.courses.rules import credit, days_late, standing
from server.store.courses import Attempt, GradeRule, LateRule, Policy

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(hours: float, verdict: str | None = "WRONG_VALUE", score: float | None = 0.0, sid: str = "") -> Attempt:
    return Attempt(
        submission_id=sid or f"s{hours}", submitted_at=T0 + timedelta(hours=hours), verdict=verdict, score=score
    )


def ok(hours: float) -> Attempt:
    return at(hours, "ACCEPTED", 1.0)


def test_days_late_counts_started_days() -> None:
    assert days_late(T0, T0) == 0
    assert days_late(T0 - timedelta(seconds=1), T0) == 0
    assert days_late(T0 + timedelta(seconds=1), T0) == 1
    assert days_late(T0 + timedelta(days=1), T0) == 1
    assert days_late(T0 + timedelta(days=1, seconds=1), T0) == 2
    assert days_late(T0 + timedelta(days=9), None) == 0


def test_penalty_per_day_up_to_the_cap() -> None:
    policy = Policy(due_at=T0, late_rule=LateRule.PENALTY, penalty_per_day=0.2, penalty_cap=0.5)
    assert credit(policy, T0, T0) == 1.0
    assert credit(policy, T0 + timedelta(hours=1), T0) == pytest.approx(0.8)
    assert credit(policy, T0 + timedelta(days=1, hours=1), T0) == pytest.approx(0.6)
    assert credit(policy, T0 + timedelta(days=30), T0) == pytest.approx(0.5)


def test_late_rule_none_gives_no_credit_after_the_deadline() -> None:
    policy = Policy(due_at=T0, late_rule=LateRule.NONE)
    assert credit(policy, T0, T0) == 1.0
    assert credit(policy, T0 + timedelta(seconds=1), T0) == 0.0
    late = standing([at(-1), ok(2)], policy)
    assert late.score == 0.0 and late.attempts == 2 and late.solved_at == T0 + timedelta(hours=2)


def test_best_takes_the_earliest_best_and_ignores_later_worse() -> None:
    result = standing([at(3), ok(1), ok(2), at(0)], Policy())
    assert result.score == 1.0 and result.scoring is not None and result.scoring.submission_id == "s1"
    assert result.attempts == 4 and result.solved_at == T0 + timedelta(hours=1) and not result.late


def test_last_takes_the_latest_even_when_worse() -> None:
    result = standing([ok(1), at(3), at(2, "ACCEPTED", 1.0)], Policy(grade_rule=GradeRule.LAST))
    assert result.score == 0.0 and result.scoring is not None and result.scoring.submission_id == "s3"
    assert result.solved_at == T0 + timedelta(hours=1)


def test_best_with_a_penalty_can_prefer_an_earlier_partial_score() -> None:
    policy = Policy(due_at=T0, penalty_per_day=0.5, penalty_cap=1.0)
    result = standing([at(-2, "WRONG_POLICY", 0.7), ok(30)], policy)  # 0.7 on time beats 1.0 x (1 - 2 x 0.5)
    assert result.score == pytest.approx(0.7) and not result.late
    extended = standing([at(-2, "WRONG_POLICY", 0.7), ok(30)], policy, extension_due_at=T0 + timedelta(days=2))
    assert extended.score == 1.0 and not extended.late


def test_ungraded_internal_errors_and_early_attempts_do_not_count() -> None:
    policy = Policy(opens_at=T0)
    result = standing([ok(-1), at(1, None, None), at(2, "INTERNAL_ERROR", 0.0), at(3)], policy)
    assert result.attempts == 1 and result.early == 1 and result.score == 0.0 and result.solved_at is None
    assert standing([], policy).score is None


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(penalty_per_day=-0.1),
        dict(penalty_cap=1.5),
        dict(penalty_per_day=float("nan")),
        dict(opens_at=T0, due_at=T0 - timedelta(hours=1)),
    ],
)
def test_bad_policies_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Policy(**kwargs)


def test_a_grace_period_keeps_a_minute_late_on_time_and_counts_days_from_its_end() -> None:
    policy = Policy(due_at=T0, late_rule=LateRule.PENALTY, penalty_per_day=0.25, grace_minutes=10)
    assert days_late(T0 + timedelta(minutes=10), T0, 10) == 0
    assert days_late(T0 + timedelta(minutes=10, seconds=1), T0, 10) == 1
    assert days_late(T0 + timedelta(days=1, minutes=10), T0, 10) == 1
    assert days_late(T0 + timedelta(days=1, minutes=10, seconds=1), T0, 10) == 2
    assert credit(policy, T0 + timedelta(minutes=9), T0) == 1.0
    assert credit(policy, T0 + timedelta(minutes=11), T0) == pytest.approx(0.75)
    on_time = standing([ok(0.1)], policy)  # 6 minutes after the deadline
    assert on_time.score == 1.0 and not on_time.late
    strict = standing([ok(0.1)], Policy(due_at=T0, late_rule=LateRule.NONE, grace_minutes=5))
    assert strict.score == 0.0 and strict.late
    extended = standing([ok(48.05)], policy, extension_due_at=T0 + timedelta(hours=48))  # grace after an extension too
    assert extended.score == 1.0 and not extended.late


@pytest.mark.parametrize("minutes", [-1, 24 * 60 + 1])
def test_a_grace_period_is_zero_to_a_day(minutes: int) -> None:
    with pytest.raises(ValueError, match="grace"):
        Policy(due_at=T0, grace_minutes=minutes)
