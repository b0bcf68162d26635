"""A budget problem's rule (`[memory] rule = "budget"`), its two judgements and its score, fast:
the residuals fit each case's budget or the verdict is WRONG_POLICY with by how much, and the
policy part of the score is (F + R*) / (F + R)."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from graders.checks.comparison import RecomputeFigures
from graders.checks.recompute import check_recompute
from graders.checks.registry import score_of
from graders.checks.residuals import check_residuals
from graders.problems.spec import ProblemSpec, Scoring
from graders.verdict import CheckResult, Verdict
from tests.unit.test_checks import REFERENCE_RESIDUALS, residual, rule_spec, run_with

# REFERENCE_RESIDUALS: w1 f32[4,4] and x, dot f32[8,4]: 64 + 128 + 128 = 320 bytes
BUDGET = {"budget_bytes": 400, "forward_flops": 1_000, "optimum": {"flops": 200, "optimal": True}}


def budget_run(submitted: list | None = None, recompute: int = 200, largest: int = 0):  # type: ignore[no-untyped-def]
    run = run_with([r.model_copy() for r in (submitted or REFERENCE_RESIDUALS)])
    run.expected.budget = dict(BUDGET)
    run.expected.bwd_largest_value_elements = largest
    run.bwd_recompute = RecomputeFigures(flops=recompute, flops_low=recompute)
    return run


def test_a_budget_needs_one_per_case_and_no_mesh() -> None:
    assert rule_spec(rule="budget", budgets={"small": 400}).memory.budgets == {"small": 400}
    with pytest.raises(ValidationError, match="needs budgets"):
        rule_spec(rule="budget")
    with pytest.raises(ValidationError, match="every case a budget"):
        rule_spec(rule="budget", budgets={"large": 400})
    with pytest.raises(ValidationError, match='only with rule = "budget"'):
        rule_spec(rule="exact", budgets={"small": 400})
    with pytest.raises(ValidationError, match="bound_bwd_peak is not read"):
        rule_spec(rule="budget", budgets={"small": 400}, bound_bwd_peak=True)
    raw = rule_spec(rule="budget", budgets={"small": 400}).model_dump(mode="json", exclude_none=True)
    raw["mesh"] = {"axes": {"data": 1}}
    with pytest.raises(ValidationError, match="budget problem on a mesh"):
        ProblemSpec.model_validate(raw)


def test_any_residuals_within_the_budget_pass_and_over_it_fail_by_how_much() -> None:
    spec = rule_spec(rule="budget", budgets={"small": 400})
    other = [residual([4, 4], note="from the argument w1"), residual([8, 8], note="output of tanh")]  # 320 B
    assert check_residuals([budget_run(other)], spec=spec).passed  # not the reference's values: fine
    over = [*other, residual([4, 4], note="output of sin")]  # 384 B
    assert check_residuals([budget_run(over)], spec=spec).passed
    over.append(residual([8, 4], note="output of cos"))  # 512 B
    result = check_residuals([budget_run(over)], spec=spec)
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "keeps 512 bytes of residuals, 112 over the budget of 400" in result.message
    assert "required policy" not in result.message  # an open problem has none
    loop_counter = residual([], dtype="int32", note="from the argument i")  # bookkeeping: never counted
    assert check_residuals([budget_run([*other, loop_counter])], spec=spec).passed


@pytest.mark.parametrize(
    ("recompute", "largest", "fraction"),
    [
        (200, 0, 1.0),  # the optimum
        (150, 0, 1.0),  # below it (a cheaper derivative): capped at 1
        (1_200, 0, (1_000 + 200) / (1_000 + 1_200)),  # everything again and more
        (260, 30, 1.0),  # within two elementwise passes over the largest value
    ],
)
def test_the_policy_part_is_the_share_of_the_best_policys_speed(recompute: int, largest: int, fraction: float) -> None:
    spec = rule_spec(rule="budget", budgets={"small": 400})
    run = budget_run(recompute=recompute, largest=largest)
    run.bwd_flops = 1_000
    run.expected.bwd_flops = 1_000
    result = check_recompute([run], rule=spec.memory)
    assert result.passed and result.judged and result.fraction == pytest.approx(fraction, abs=1e-4)
    assert re.search(r"Policy score \d\.\d{3} = \(forward 1,000 \+ least 200\)", result.message)


def test_a_program_below_the_optimum_is_named_beyond_it_and_one_at_it_is_not() -> None:
    """The optimum is over the schedules of the reference's program; a program recomputing less
    (an algebraic rewrite, a cheaper derivative) is said to be beyond it, with how far."""
    spec = rule_spec(rule="budget", budgets={"small": 400})
    messages = {}
    for recompute in (150, 200, 230):
        run = budget_run(recompute=recompute)
        run.bwd_flops = run.expected.bwd_flops = 1_000
        messages[recompute] = check_recompute([run], rule=spec.memory).message
    assert "50 FLOPs below the optimum of any schedule of the reference's program: beyond the optimum" in messages[150]
    assert "algebraic rewrite" in messages[150] and "capped at 1" in messages[150]
    assert "beyond the optimum" not in messages[200] and "beyond the optimum" not in messages[230]
    measured = budget_run(recompute=150)
    measured.bwd_flops = measured.expected.bwd_flops = 1_000
    measured.expected.budget["optimum"] = {"flops": 200, "measured": 3}  # a peak budget's best schedule
    message = check_recompute([measured], rule=spec.memory).message
    assert "below the best schedule of the reference's program the judge measured" in message


def test_the_score_takes_the_policy_fraction() -> None:
    checks = [
        CheckResult(name="value", passed=True, message=""),
        CheckResult(name="gradient", passed=True, message=""),
        CheckResult(name="residuals", passed=True, message=""),
        CheckResult(name="peak_memory", passed=True, message=""),
        CheckResult(name="recompute", passed=True, message="", fraction=0.5),
    ]
    scoring = Scoring(value=0.34, gradient=0.33, policy=0.33)
    assert score_of(checks, scoring) == pytest.approx(0.34 + 0.33 + 0.33 * 0.5)
    checks[-1] = CheckResult(name="recompute", passed=True, message="")
    assert score_of(checks, scoring) == 1.0
    checks[2] = CheckResult(name="residuals", passed=False, message="")  # over the budget
    assert score_of(checks, scoring) == pytest.approx(0.67)


def test_the_panel_names_the_values_the_optimum_keeps_that_yours_does_not() -> None:
    from server.web.budget_view import optimum_values

    report = {
        "optimum": {"saved": ["argument x f32[8,4]", "tanh f32[8,4]", "tanh f32[8,4]"]},
        "submitted": [
            {"shape": [8, 4], "dtype": "float32", "source": "argument x"},
            {"shape": [8, 4], "dtype": "float32", "source": "tanh"},
            {"shape": [8, 4], "dtype": "float32", "source": "dot_general"},
        ],
    }
    rows = optimum_values(report)
    assert [(r.label, r.optimum, r.yours, r.missing) for r in rows] == [
        ("tanh f32[8,4]", 2, 1, 1),  # what to act on first
        ("argument x f32[8,4]", 1, 1, 0),
    ]
    assert optimum_values({"submitted": []}) == [] and optimum_values({"optimum": {"saved": "junk"}}) == []


def test_offloaded_residuals_count_against_a_residual_budget() -> None:
    """Offloading is not free room: the judge prices recomputation, not transfers, so "offload
    everything" would fit any budget and recompute nothing."""
    spec = rule_spec(rule="budget", budgets={"small": 400})
    offloaded = residual([8, 4], note="output of cos")  # 128 bytes
    offloaded.memory_kind = "pinned_host"
    result = check_residuals([budget_run([*REFERENCE_RESIDUALS, offloaded])], spec=spec)  # 320 + 128
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "keeps 448 bytes of residuals (128 of them offloaded to host memory, which count too" in result.message
    assert "48 over the budget of 400" in result.message
