"""A budget on the backward pass's peak (`budget_of = "peak"`), fast: the peak decides what fits,
whatever the residuals; the optimum is the least recomputation among measured schedules that fit
(`graders.budget.measured`, against brute force); reference.py's SCHEDULES are checked; the panel's
plane puts peaks on x and draws the schedules."""

from __future__ import annotations

import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from graders.budget.measured import best_within, peak_frontier
from graders.checks.check import Evidence
from graders.checks.recompute import check_recompute
from graders.checks.residuals import ResidualsCheck, check_residuals
from graders.reference.failures import ReferenceCheckError
from graders.reference.schedules import MAX_SCHEDULES, schedule_table
from server.web.plane import plane
from tests.unit.test_budget_rule import budget_run
from tests.unit.test_checks import REFERENCE_RESIDUALS, residual, rule_spec

PEAK = {"budget_bytes": 5_000, "budget_of": "peak", "forward_flops": 1_000}


def peak_run(peak: int, submitted: list | None = None, recompute: int = 200):  # type: ignore[no-untyped-def]
    run = budget_run(submitted, recompute=recompute)
    run.expected.budget = {**PEAK, "optimum": {"flops": 200, "optimal": False, "measured": 4, "label": "two levels"}}
    run.bwd_peak_bytes = peak
    return run


def test_budget_of_is_read_only_with_a_budget() -> None:
    assert rule_spec(rule="budget", budgets={"small": 400}, budget_of="peak").memory.budget_of == "peak"
    assert rule_spec(rule="budget", budgets={"small": 400}).memory.budget_of == "residuals"
    with pytest.raises(ValidationError, match='budget_of is read only with rule = "budget"'):
        rule_spec(rule="at_most", budget_of="peak")
    with pytest.raises(ValidationError):
        rule_spec(rule="budget", budgets={"small": 400}, budget_of="both")


def test_the_peak_decides_what_fits_whatever_the_residuals() -> None:
    spec = rule_spec(rule="budget", budgets={"small": 5_000}, budget_of="peak")
    many = [*REFERENCE_RESIDUALS, residual([40, 40], note="output of tanh")]  # 6,720 bytes of residuals
    fits = check_residuals([peak_run(5_000, many)], spec=spec)
    assert fits.passed and fits.message == "peaks within the budget on every case"
    over = check_residuals([peak_run(5_001)], spec=spec)  # the reference's own residuals
    assert not over.passed and over.verdict is not None and over.verdict.value == "WRONG_POLICY"
    assert "holds up to 5,001 bytes live at once in its backward pass" in over.message
    assert "1 over the budget of 5,000" in over.message
    advice = ResidualsCheck().explain(Evidence(message=over.message))
    assert advice.headline == "Your program does not fit the memory budget"


def test_the_score_names_the_best_measured_schedule() -> None:
    spec = rule_spec(rule="budget", budgets={"small": 5_000}, budget_of="peak")
    run = peak_run(4_000, recompute=1_200)
    run.bwd_flops = run.expected.bwd_flops = 2_000
    result = check_recompute([run], rule=spec.memory)
    assert result.fraction == pytest.approx((1_000 + 200) / (1_000 + 1_200), abs=1e-4)
    assert "the least the judge measured within the budget, of the reference and 4 schedules (a backward peak of" in (
        result.message
    )


points = st.lists(
    st.fixed_dictionaries(
        {"label": st.text(min_size=1, max_size=5), "peak_bytes": st.integers(0, 100), "flops": st.integers(0, 100)}
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(points, st.integers(0, 100))
def test_the_best_within_a_budget_is_brute_forces_and_the_frontier_steps_through_it(pts: list, budget: int) -> None:
    fitting = [p for p in pts if p["peak_bytes"] <= budget]
    best = best_within(pts, budget)
    if not fitting:
        assert best is None
        return
    assert best is not None and best["flops"] == min(p["flops"] for p in fitting)
    steps = peak_frontier(pts)  # the most bytes first, each step recomputing strictly less
    assert all(a["bytes"] > b["bytes"] and a["flops"] < b["flops"] for a, b in zip(steps, steps[1:], strict=False))
    on_frontier = [s for s in steps if s["bytes"] <= budget]
    assert on_frontier and on_frontier[0]["flops"] == best["flops"]  # the frontier answers every budget


def test_schedules_must_be_a_small_dict_of_labelled_functions() -> None:
    def f(ws, x):  # type: ignore[no-untyped-def]
        return x

    assert schedule_table(types.SimpleNamespace()) == {}
    assert schedule_table(types.SimpleNamespace(SCHEDULES={"every layer": f})) == {"every layer": f}
    for bad in ([f], {"": f}, {"x" * 61: f}, {"ok": 3}, {str(i): f for i in range(MAX_SCHEDULES + 1)}):
        with pytest.raises(ReferenceCheckError):
            schedule_table(types.SimpleNamespace(SCHEDULES=bad))


def test_the_plane_of_a_peak_budget_draws_peaks_and_the_schedules() -> None:
    report = {
        "budget_of": "peak",
        "budget_bytes": 1_300_000,
        "submitted_bytes": 327_680,
        "expected_bytes": 327_680,
        "submitted_bwd_peak_bytes": 1_277_984,
        "expected_bwd_peak_bytes": 1_212_432,
        "submitted_recompute_flops": 8_454_216,
        "expected_recompute_flops": 16_908_360,
        "no_checkpoint_bwd_peak_bytes": 2_654_224,
        "frontier": [{"bytes": 1_277_984, "flops": 8_454_216}, {"bytes": 1_212_432, "flops": 16_908_360}],
        "schedules": [
            {"label": "every layer", "bytes": 524_288, "peak_bytes": 1_605_648, "flops": 8_454_176},
            {"label": "broken", "bytes": None, "peak_bytes": "x", "flops": 1},
        ],
    }
    drawn = plane(report)
    assert drawn is not None
    by_key = {p.key: p for p in drawn.points}
    assert by_key["yours"].nbytes == 1_277_984 and by_key["reference"].nbytes == 1_212_432  # peaks, not residuals
    assert "plain" not in by_key  # the schedules hold the plain program a student would write
    bare = plane({**report, "schedules": []})
    assert bare is not None and {p.key: p.nbytes for p in bare.points}["plain"] == 2_654_224
    assert [p.name for p in drawn.points if p.key == "schedule"] == ["every layer"]  # the malformed one left out
    assert by_key["yours"].description.startswith("yours: 1.2 MiB at its peak")
    assert drawn.budget_x is not None and drawn.frontier
    residual_plane = plane({**report, "budget_of": "residuals"})
    assert residual_plane is not None
    assert {p.key: p.nbytes for p in residual_plane.points}["yours"] == 327_680
    assert [p.nbytes for p in residual_plane.points if p.key == "schedule"] == [524_288]


def test_a_program_over_its_budget_gets_no_word_of_praise_for_recomputing_little() -> None:
    spec = rule_spec(rule="budget", budgets={"small": 5_000}, budget_of="peak")
    run = peak_run(9_000, recompute=0)
    run.bwd_flops = run.expected.bwd_flops = 2_000
    result = check_recompute([run], rule=spec.memory)
    assert not result.judged and result.fraction is None
    assert result.message == "not scored: over the budget in case 'small' (the residuals check says by how much)"


def test_over_a_peak_budget_with_offloaded_residuals_says_they_count() -> None:
    spec = rule_spec(rule="budget", budgets={"small": 5_000}, budget_of="peak")
    offloaded = residual([8, 8], note="output of tanh")
    offloaded.memory_kind = "pinned_host"
    result = check_residuals([peak_run(6_000, [*REFERENCE_RESIDUALS, offloaded])], spec=spec)
    assert not result.passed and "the 256 bytes you offload to host memory count here too" in result.message
    assert "offload" not in check_residuals([peak_run(6_000)], spec=spec).message


def test_of_many_schedules_the_legend_names_those_on_the_frontier() -> None:
    from server.web.rendering import templates

    schedules = [{"label": f"s{i}", "bytes": 1, "peak_bytes": 1_000 + i, "flops": 5_000 - i} for i in range(12)]
    report = {
        "budget_of": "peak",
        "budget_bytes": 1_020,
        "submitted_bwd_peak_bytes": 1_005,
        "expected_bwd_peak_bytes": 1_011,
        "submitted_recompute_flops": 4_995,
        "expected_recompute_flops": 4_989,
        "frontier": [{"bytes": 1_011, "flops": 4_989}, {"bytes": 1_003, "flops": 4_997}],
        "schedules": schedules,
    }
    drawn = plane(report)
    assert drawn is not None
    listed = [p.name for p in drawn.points if p.key == "schedule" and p.listed]
    assert listed == ["s3", "s11"]  # the two on the frontier; the other ten only as points
    html = templates.env.from_string(
        '{% from "_plane.html" import plane_figure %}{{ plane_figure(p, "x", "c", "y", "x", "a") }}'
    ).render(p=drawn)
    assert "10 more schedules measured" in html and html.count("<title>") == 14  # every point hovers its name
    few = plane({**report, "schedules": schedules[:8]})
    assert few is not None and all(p.listed for p in few.points)
