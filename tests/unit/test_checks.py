"""graders/checks: array comparison, values, gradients, residual signature and peak memory checks,
on hand-built CaseExpectation / CaseRun objects."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from graders.artifact_limits import Aval
from graders.checks.comparison import (
    BRANCH_BOOKKEEPING,
    LOOP_BOOKKEEPING,
    MAX_BRANCH_INDEX_ELEMENTS,
    CaseRun,
    RecomputeFigures,
    bookkeeping_reasons,
    compare_arrays,
    compare_calibrated,
)
from graders.checks.gradients import check_gradients
from graders.checks.layout import LayoutBudget, find_layout
from graders.checks.matching import residuals_equal
from graders.checks.peak_memory import check_peak_memory
from graders.checks.recompute import check_recompute, formulation_allowance
from graders.checks.residuals import check_residuals
from graders.checks.values import check_values
from graders.problems.memory_rule import MemoryRule
from graders.problems.spec import ProblemSpec, Tolerance
from graders.reference.expectation import CaseExpectation
from graders.verdict import ResidualFact, Verdict
from graders.verifier.fd import directional_derivatives

TOL = Tolerance(rtol=1e-4, atol=1e-5)


def residual(shape: list[int], dtype: str = "float32", note: str | None = None) -> ResidualFact:
    return ResidualFact(shape=shape, dtype=dtype, note=note)


def expectation(
    *,
    name: str = "small",
    residuals: list[ResidualFact] | None = None,
    bwd_peak_bytes: int = 1000,
    outputs: list[list[np.ndarray]] | None = None,
    gradients: list[list[np.ndarray]] | None = None,
) -> CaseExpectation:
    """A case of `f(w: float32[2, 2], x: float32[3, 2]) -> float32[]`."""
    return CaseExpectation(
        name=name,
        dims={"d": 2, "N": 3},
        static={},
        arg_specs=[],
        input_avals=[Aval((2, 2), "float32"), Aval((3, 2), "float32")],
        output_avals=[Aval((), "float32")],
        residuals=residuals if residuals is not None else [],
        fwd_peak_bytes=500,
        bwd_peak_bytes=bwd_peak_bytes,
        bwd_flops=1000,
        plain_residual_bytes=None,
        plain_bwd_peak_bytes=None,
        plain_bwd_flops=None,
        full_remat_bytes=None,
        full_remat_bwd_peak_bytes=None,
        full_remat_bwd_flops=None,
        fd_step=1e-3,
        fd_reference_error=[0.0],
        outputs=outputs or [],
        gradients=gradients or [],
        residual_values=[values_of(residuals or [])],
    )


def values_of(residuals: list[ResidualFact], *, seed: int = 0) -> list[np.ndarray]:
    """One value per residual: the n-th residual of an aval gets the n-th value of that aval, so two
    lists with the same avals in any order hold the same values."""
    seen: dict[tuple, int] = {}
    out = []
    for r in residuals:
        key = (tuple(r.shape), r.dtype)
        n = seen[key] = seen.get(key, -1) + 1
        rng = np.random.default_rng(hash((key, n, seed)) % (1 << 32))
        out.append(
            np.asarray(rng.normal(size=r.shape) > 0 if r.dtype == "bool" else rng.normal(size=r.shape), dtype=r.dtype)
        )
    return out


def rule_spec(**memory: object) -> ProblemSpec:
    return ProblemSpec.model_validate(
        {
            "slug": "tiny_problem",
            "title": "Tiny",
            "difficulty": "easy",
            "entry_point": "f",
            "args": [{"name": "w", "shape": ["d", "d"]}, {"name": "x", "shape": ["N", "d"]}],
            "cases": [{"name": "small", "dims": {"d": 2, "N": 3}}],
            "tolerance": {"float32": {"rtol": 1e-4, "atol": 1e-5}},
            "memory": memory,
        }
    )


@pytest.fixture(scope="module")
def spec() -> ProblemSpec:
    return ProblemSpec.model_validate(
        {
            "slug": "tiny_problem",
            "title": "Tiny",
            "difficulty": "easy",
            "entry_point": "f",
            "args": [{"name": "w", "shape": ["d", "d"]}, {"name": "x", "shape": ["N", "d"]}],
            "cases": [{"name": "small", "dims": {"d": 2, "N": 3}}],
            "tolerance": {"float32": {"rtol": 1e-4, "atol": 1e-5}},
        }
    )


# --- compare_arrays ---------------------------------------------------------------------------------


def test_compare_equal_arrays_passes_with_zero_ratio() -> None:
    a = np.array([[1.5, -2.0], [0.0, 3.25]], dtype=np.float32)
    cmp = compare_arrays(a.copy(), a, TOL)
    assert cmp.passed and cmp.ratio == 0.0 and cmp.max_abs_diff == 0.0
    assert cmp.max_abs_expected == 3.25
    assert not cmp.all_zero


def test_compare_nan_against_number_fails() -> None:
    cmp = compare_arrays(np.array([1.0, np.nan]), np.array([1.0, 2.0]), TOL)
    assert not cmp.passed
    assert math.isinf(cmp.ratio)


def test_compare_number_against_expected_nan_fails() -> None:
    assert not compare_arrays(np.array([1.0, 2.0]), np.array([1.0, np.nan]), TOL).passed


def test_compare_nan_against_nan_passes() -> None:
    cmp = compare_arrays(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), TOL)
    assert cmp.passed and cmp.ratio == 0.0


def test_compare_infinities_match_only_the_same_infinity() -> None:
    assert compare_arrays(np.array([np.inf, -np.inf]), np.array([np.inf, -np.inf]), TOL).passed
    assert not compare_arrays(np.array([-np.inf]), np.array([np.inf]), TOL).passed
    assert not compare_arrays(np.array([1e30]), np.array([np.inf]), TOL).passed


def test_compare_shape_mismatch_fails_even_when_broadcastable() -> None:
    cmp = compare_arrays(np.ones((1, 3)), np.ones((3,)), TOL)
    assert not cmp.passed
    assert not compare_arrays(np.ones((2, 3)), np.ones((3, 2)), TOL).passed


def test_compare_atol_scales_with_largest_expected_magnitude() -> None:
    # allowed = atol * max(1, max|expected|) + rtol * |expected|; with rtol 0 and max|expected| 1000,
    # every element may be off by 1e-3 * 1000 = 1, including the element whose expected value is 0.
    tol = Tolerance(rtol=0.0, atol=1e-3)
    expected = np.array([1000.0, 0.0])
    inside = compare_arrays(np.array([1000.0, 0.9]), expected, tol)
    assert inside.passed and inside.ratio == pytest.approx(0.9)
    assert not compare_arrays(np.array([1000.0, 1.1]), expected, tol).passed


def test_compare_atol_is_not_scaled_below_one() -> None:
    # max|expected| = 0.01 < 1, so the allowance stays atol itself.
    tol = Tolerance(rtol=0.0, atol=1e-3)
    expected = np.array([0.01, 0.0])
    assert compare_arrays(np.array([0.01, 0.0009]), expected, tol).passed
    assert not compare_arrays(np.array([0.01, 0.0011]), expected, tol).passed


def test_compare_rtol_is_relative_to_each_expected_element() -> None:
    tol = Tolerance(rtol=1e-2, atol=0.0)
    expected = np.array([100.0, 1.0])
    ok = compare_arrays(np.array([100.9, 1.009]), expected, tol)
    assert ok.passed and ok.ratio == pytest.approx(0.9, rel=1e-6)
    # 1.011 is within 1% of 100 but not of its own expected value 1.0
    assert not compare_arrays(np.array([100.0, 1.011]), expected, tol).passed


def test_compare_zero_tolerance_requires_exact_equality() -> None:
    tol = Tolerance(rtol=0.0, atol=0.0)
    assert compare_arrays(np.array([0.0, 2.0]), np.array([0.0, 2.0]), tol).passed
    assert not compare_arrays(np.array([1e-12, 2.0]), np.array([0.0, 2.0]), tol).passed


def test_compare_detects_all_zero_output_against_nonzero_expected() -> None:
    assert compare_arrays(np.zeros(3), np.array([0.0, 1.0, 2.0]), TOL).all_zero
    assert not compare_arrays(np.zeros(3), np.zeros(3), TOL).all_zero
    assert not compare_arrays(np.array([0.0, 0.0, 1e-9]), np.array([0.0, 1.0, 2.0]), TOL).all_zero


# --- check_residuals ---------------------------------------------------------------------------------

REFERENCE_RESIDUALS = [
    residual([4, 4], note="from the argument w1"),
    residual([8, 4], note="from the argument x"),
    residual([8, 4], note="output of dot_general"),
]


def run_with(
    submitted: list[ResidualFact],
    *,
    bwd_peak_bytes: int = 0,
    expected_peak: int = 1000,
    name: str = "small",
    values: list[np.ndarray] | None = None,
) -> CaseRun:
    return CaseRun(
        expected=expectation(
            name=name, residuals=[r.model_copy() for r in REFERENCE_RESIDUALS], bwd_peak_bytes=expected_peak
        ),
        residuals=submitted,
        bwd_peak_bytes=bwd_peak_bytes,
        bwd_flops=1000,
        residual_values=[values if values is not None else values_of(submitted)],
    )


def test_exact_rule_accepts_the_same_residuals_in_another_order() -> None:
    shuffled = [residual([8, 4]), residual([4, 4]), residual([8, 4])]
    result = check_residuals([run_with(shuffled)], spec=rule_spec(rule="exact"))
    assert result.passed
    assert result.details["small"] == {
        "expected_count": 3,
        "submitted_count": 3,
        "expected_bytes": 64 + 128 + 128,
        "submitted_bytes": 320,
        "expected_host_bytes": 0,
        "submitted_host_bytes": 0,
        "expected_bwd_flops": 1000,
        "submitted_bwd_flops": 1000,
        "values_matched": 3,
    }


def test_exact_rule_rejects_a_missing_residual_and_lists_both_sides() -> None:
    result = check_residuals([run_with([residual([4, 4]), residual([8, 4])])], spec=rule_spec(rule="exact"))
    assert not result.passed
    assert result.verdict is Verdict.WRONG_POLICY
    assert "not saved by yours: f32[8,4] x1" in result.message
    assert "the required policy saves: 3 residuals, 320 bytes" in result.message
    assert "yours saves: 2 residuals, 192 bytes" in result.message
    assert "output of dot_general" in result.message  # the expected listing keeps its notes


def test_exact_rule_rejects_an_extra_residual_with_the_same_bytes_elsewhere() -> None:
    # same total bytes (f32[8,4] == 2 x f32[4,4]) but a different signature
    submitted = [residual([4, 4]), residual([8, 4]), residual([4, 4]), residual([4, 4])]
    result = check_residuals([run_with(submitted)], spec=rule_spec(rule="exact"))
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "not saved by yours: f32[8,4] x1" in result.message
    assert "saved by yours only: f32[4,4] x2" in result.message


def test_exact_rule_distinguishes_dtypes_of_the_same_shape() -> None:
    submitted = [residual([4, 4]), residual([8, 4]), residual([8, 4], dtype="bool")]
    result = check_residuals([run_with(submitted)], spec=rule_spec(rule="exact"))
    assert not result.passed
    assert "saved by yours only: bool[8,4] x1" in result.message


def test_exact_rule_reports_the_first_failing_case_by_name() -> None:
    good = run_with(list(REFERENCE_RESIDUALS), name="small")
    bad = run_with([residual([4, 4])], name="large")
    result = check_residuals([good, bad], spec=rule_spec(rule="exact"))
    assert not result.passed
    assert result.message.startswith("case 'large'")
    assert result.details["large"]["submitted_count"] == 1


def test_at_most_rule_accepts_fewer_residual_bytes() -> None:
    result = check_residuals([run_with([residual([4, 4])])], spec=rule_spec(rule="at_most"))
    assert result.passed
    assert result.verdict is None


def test_at_most_rule_rejects_more_residual_bytes() -> None:
    submitted = REFERENCE_RESIDUALS + [residual([1], dtype="float32")]
    result = check_residuals([run_with(submitted)], spec=rule_spec(rule="at_most"))
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "324 bytes" in result.message and "320 allowed" in result.message


def test_at_most_rule_respects_slack_bytes_inclusively() -> None:
    submitted = REFERENCE_RESIDUALS + [residual([4], dtype="float32")]  # 16 bytes over
    assert check_residuals([run_with(submitted)], spec=rule_spec(rule="at_most", slack_bytes=16)).passed
    assert not check_residuals([run_with(submitted)], spec=rule_spec(rule="at_most", slack_bytes=15)).passed


# --- check_peak_memory -------------------------------------------------------------------------------


def test_peak_at_most_fails_above_reference_peak_plus_slack() -> None:
    rule = MemoryRule(rule="at_most", slack_bytes=100)
    assert check_peak_memory([run_with(REFERENCE_RESIDUALS, bwd_peak_bytes=1100)], rule=rule).passed
    result = check_peak_memory([run_with(REFERENCE_RESIDUALS, bwd_peak_bytes=1101)], rule=rule)
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "1,101 bytes" in result.message and "1,000 bytes" in result.message
    assert result.details["small"]["submitted_bwd_peak_bytes"] == 1101


def test_peak_exact_rule_never_fails_and_reports_the_numbers() -> None:
    result = check_peak_memory([run_with(REFERENCE_RESIDUALS, bwd_peak_bytes=987_654)], rule=MemoryRule(rule="exact"))
    assert result.passed
    assert "987,654 bytes" in result.message and "1,000 bytes" in result.message
    assert result.details["small"]["expected_bwd_peak_bytes"] == 1000
    assert result.details["small"]["submitted_bwd_peak_bytes"] == 987_654


# --- check_values / check_gradients --------------------------------------------------------------

W = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
X = np.array([[0.5, -1.0], [2.0, 0.0], [1.0, 1.0]], dtype=np.float32)


def value_run(got: float, want: float) -> CaseRun:
    exp = expectation(outputs=[[np.float32(want)]], gradients=[[W, X]])
    return CaseRun(expected=exp, outputs=[[np.asarray(got, dtype=np.float32)]])


def test_values_pass_within_tolerance(spec: ProblemSpec) -> None:
    result = check_values([value_run(10.00001, 10.0)], spec=spec)
    assert result.passed, result.message


def test_wrong_value_is_wrong_answer(spec: ProblemSpec) -> None:
    result = check_values([value_run(11.0, 10.0)], spec=spec)
    assert not result.passed
    assert result.verdict is Verdict.WRONG_ANSWER
    assert "case 'small'" in result.message and "hidden input 1 of 1" in result.message


def test_value_check_finds_mismatch_on_a_later_hidden_input(spec: ProblemSpec) -> None:
    exp = expectation(outputs=[[np.float32(1.0)], [np.float32(2.0)], [np.float32(3.0)]])
    run = CaseRun(expected=exp, outputs=[[np.float32(1.0)], [np.float32(2.0)], [np.float32(-3.0)]])
    result = check_values([run], spec=spec)
    assert not result.passed and "hidden input 3 of 3" in result.message


def test_value_check_says_how_far_the_worst_mismatch_goes(spec: ProblemSpec) -> None:
    exp = expectation(outputs=[[np.float32(1.0)], [np.float32(2.0)], [np.float32(3.0)]])
    run = CaseRun(expected=exp, outputs=[[np.float32(1.1)], [np.float32(2.0)], [np.float32(30.0)]])
    result = check_values([run], spec=spec)
    assert not result.passed and "hidden input 1 of 3" in result.message  # the first, then the worst
    assert re.search(r"\(and [\d.e+]+ times it in case 'small' \(.*\), hidden input 3\)\. Check", result.message)
    near = CaseRun(expected=exp, outputs=[[np.float32(1.1)], [np.float32(2.0)], [np.float32(3.3)]])
    assert "times it in" not in check_values([near], spec=spec).message  # no worse than twice: said once


def gradient_run(got_w: np.ndarray, got_x: np.ndarray) -> CaseRun:
    exp = expectation(outputs=[[np.float32(1.0)]], gradients=[[W, X]])
    return CaseRun(expected=exp, outputs=[[np.float32(1.0)]], gradients=[[got_w, got_x]])


def test_matching_gradients_pass(spec: ProblemSpec) -> None:
    result = check_gradients([gradient_run(W.copy(), X.copy())], spec=spec, leaf_names=["w", "x"])
    assert result.passed, result.message


def test_all_zero_gradient_is_wrong_gradient_that_names_argument_and_stop_gradient(spec: ProblemSpec) -> None:
    result = check_gradients([gradient_run(W.copy(), np.zeros_like(X))], spec=spec, leaf_names=["w", "x"])
    assert not result.passed
    assert result.verdict is Verdict.WRONG_GRADIENT
    assert "`x`" in result.message and "`w`" not in result.message
    assert "stop_gradient" in result.message
    assert result.details["small"] == {"wrong_gradients": ["x"]}


def test_nonzero_wrong_gradient_names_argument_without_stop_gradient_hint(spec: ProblemSpec) -> None:
    result = check_gradients([gradient_run(2 * W, X.copy())], spec=spec, leaf_names=["w", "x"])
    assert not result.passed and result.verdict is Verdict.WRONG_GRADIENT
    assert "`w`" in result.message
    assert "stop_gradient" not in result.message


# --- residual values: the second axis of a policy ----------------------------------------------------


def test_same_avals_but_another_value_is_wrong_policy_and_names_the_provenance() -> None:
    reference = [r.model_copy() for r in REFERENCE_RESIDUALS]
    submitted = [residual([4, 4]), residual([8, 4]), residual([8, 4])]
    submitted[2].source = "maximum"
    values = values_of(REFERENCE_RESIDUALS)
    values[2] = np.maximum(values[2], 0)  # relu(x @ w1) saved where the policy saves x @ w1
    run = run_with(submitted, values=values)
    run.expected.residuals[2].source = "dot_general"
    result = check_residuals([run], spec=rule_spec(rule="exact"))
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "1 value is not one the required policy saves" in result.message
    assert "you save f32[8,4] from `maximum` where the policy saves f32[8,4] from `dot_general`" in result.message
    assert [f.matched for f in submitted] == [True, True, False]
    assert run.expected_matched == [True, True, False]
    assert reference == REFERENCE_RESIDUALS  # the shared listing is untouched


def test_two_residuals_of_one_aval_saved_in_swapped_order_match() -> None:
    values = values_of(REFERENCE_RESIDUALS)
    submitted = [residual([4, 4]), residual([8, 4]), residual([8, 4])]
    swapped = [values[0], values[2], values[1]]
    result = check_residuals([run_with(submitted, values=swapped)], spec=rule_spec(rule="exact"))
    assert result.passed, result.message
    assert all(f.matched for f in submitted)


def test_float_noise_of_another_summation_order_still_matches() -> None:
    values = values_of(REFERENCE_RESIDUALS)
    rng = np.random.default_rng(7)
    noisy = [np.asarray(v * (1 + 1e-6 * rng.standard_normal(v.shape)), np.float32) for v in values]
    submitted = [residual([4, 4]), residual([8, 4]), residual([8, 4])]
    assert check_residuals([run_with(submitted, values=noisy)], spec=rule_spec(rule="exact")).passed
    off = [v.copy() for v in values]
    off[1] = off[1] * 1.01  # a different value: 1% off everywhere
    result = check_residuals(
        [run_with([residual([4, 4]), residual([8, 4]), residual([8, 4])], values=off)], spec=rule_spec(rule="exact")
    )
    assert not result.passed


def test_a_mask_may_differ_in_a_rare_element_but_not_in_many() -> None:
    mask = np.zeros((20, 20), dtype=bool)
    mask[::2] = True
    one_flip = mask.copy()
    one_flip[0, 0] = ~one_flip[0, 0]
    assert residuals_equal(one_flip, mask, None, TOL)
    assert not residuals_equal(~mask, mask, None, TOL)


def test_avals_match_rule_ignores_values() -> None:
    values = [np.zeros(r.shape, np.float32) for r in REFERENCE_RESIDUALS]
    submitted = [residual([4, 4]), residual([8, 4]), residual([8, 4])]
    assert not check_residuals([run_with(submitted, values=values)], spec=rule_spec(rule="exact")).passed
    assert check_residuals([run_with(submitted, values=values)], spec=rule_spec(rule="exact", match="avals")).passed


def test_peak_check_that_only_reports_is_not_judged() -> None:
    result = check_peak_memory([run_with(REFERENCE_RESIDUALS)], rule=MemoryRule(rule="exact"))
    assert result.passed and not result.judged
    assert check_peak_memory([run_with(REFERENCE_RESIDUALS)], rule=MemoryRule(rule="at_most")).judged


# --- calibrated tolerances -----------------------------------------------------------------------


def test_calibrated_tolerance_accepts_another_summation_order_and_rejects_a_wrong_formula() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 2048))
    b = rng.standard_normal(2048)
    truth = a @ b
    reference = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float32)
    # another order: summed in reversed chunks, in float32
    other = sum(
        a[:, i : i + 16].astype(np.float32) @ b[i : i + 16].astype(np.float32) for i in reversed(range(0, 2048, 16))
    ).astype(np.float32)
    reference_error = float(np.max(np.abs(reference - truth)))  # the float32 reference's own error
    assert reference_error > 0
    tight = Tolerance(rtol=1e-7, atol=1e-8)  # a fixed tolerance too tight for float32 sums
    assert not compare_arrays(other, reference, tight).passed
    assert compare_calibrated(other, reference, reference_error, tight).passed
    wrong = (a.astype(np.float32) @ (1.001 * b).astype(np.float32)).astype(np.float32)
    assert compare_calibrated(wrong, reference, reference_error, tight).ratio > 10
    assert not compare_calibrated(np.zeros_like(reference), reference, reference_error, TOL).passed


def test_calibrated_tolerance_without_truth_is_the_fixed_one() -> None:
    a = np.array([1.0, 2.0], np.float32)
    assert compare_calibrated(a * (1 + 1e-5), a, None, TOL).passed
    assert not compare_calibrated(a * 1.01, a, None, TOL).passed


def test_exact_zeros_pass_through_the_floor() -> None:
    zero = np.zeros(5, np.float32)
    assert compare_calibrated(zero, zero, 0.0, TOL).passed
    assert compare_calibrated(np.full(5, 1e-7, np.float32), zero, 0.0, TOL).passed
    assert not compare_calibrated(np.full(5, 1e-3, np.float32), zero, 0.0, TOL).passed


def test_checks_do_not_crash_on_a_dimension_of_size_zero(spec: ProblemSpec) -> None:
    empty = np.zeros((0, 2), np.float32)
    exp = expectation(outputs=[[np.zeros((0,), np.float32)]], gradients=[[W, empty]])
    exp.output_avals = [Aval((0,), "float32")]
    run = CaseRun(expected=exp, outputs=[[np.zeros((0,), np.float32)]], gradients=[[W.copy(), empty.copy()]])
    assert check_values([run], spec=spec).passed
    assert check_gradients([run], spec=spec, leaf_names=["w", "x"]).passed
    fd, analytic, noise = directional_derivatives(
        lambda *xs: [np.sum(xs[0])], [empty], [empty], [np.float32(1.0)], [empty], n_out=1, step=1e-3
    )
    assert fd == 0.0 and analytic == 0.0 and noise == 0.0


def test_the_float64_finite_difference_disagreement_is_relative_to_the_larger_rate() -> None:
    from graders.reference.self_checks import FD_TOLERANCE, fd_disagreement

    assert fd_disagreement(1.0, 1.0 + 1e-9) < FD_TOLERANCE  # float64 rounding
    assert fd_disagreement(1.0, 2.0) == 0.5  # gradients twice too large
    assert fd_disagreement(0.0, 0.3) == 1.0  # a stop_gradient: the function moves, its gradient says not
    assert fd_disagreement(1e-14, -1e-14) == 0.0  # no slope at all
    assert fd_disagreement(float("nan"), 1.0) == float("inf")


def test_rounding_in_a_central_difference_along_a_nearly_flat_direction_is_not_a_wrong_gradient() -> None:
    """A direction nearly orthogonal to the gradient: the derivative along it is tiny, and the
    float64 rounding of <u, f(x ± h v)> (about 1e-7 at h = 1e-9) is most of the central difference.
    Without the noise term a correct reference failed its self-check on one seed in the bank."""
    from graders.reference.self_checks import FD_TOLERANCE, fd_disagreement

    rng = np.random.default_rng(7)
    x, u, v = rng.normal(size=64), rng.normal(size=64), rng.normal(size=64)
    gradient = u * np.exp(np.cos(x)) * -np.sin(x)  # of <u, exp(cos(x))>
    v -= (v @ gradient) / (gradient @ gradient) * gradient  # orthogonal to the gradient ...
    v += 2e-6 * gradient / np.linalg.norm(gradient)  # ... but for a rate of about 2e-6 * |g|
    fd, analytic, noise = directional_derivatives(
        lambda x: [np.exp(np.cos(x))], [x], [v], [u], [gradient], n_out=1, step=1e-9
    )
    assert fd_disagreement(fd, analytic) > FD_TOLERANCE  # rounding alone looked like a wrong gradient
    assert fd_disagreement(fd, analytic, noise) <= FD_TOLERANCE
    fd, analytic, noise = directional_derivatives(  # a gradient 1% off along a real direction still fails
        lambda x: [np.exp(np.cos(x))], [x], [u], [u], [1.01 * gradient], n_out=1, step=1e-9
    )
    assert fd_disagreement(fd, analytic, noise) > FD_TOLERANCE


def test_the_short_comparison_of_finite_arrays_gives_the_same_bits_as_the_general_one() -> None:
    from graders.checks.comparison import _compare_general

    rng = np.random.default_rng(7)
    cases = []
    for scale in (1e-6, 1.0, 1e4):
        e = (rng.standard_normal((64, 33)) * scale).astype(np.float32)
        for noise in (0.0, 1e-7, 1e-3, 1.0):
            g = (e + rng.standard_normal(e.shape) * noise * scale).astype(np.float32)
            cases.append((g, e))
    zeros = np.zeros((5,), np.float32)
    cases += [
        (zeros, zeros),
        (zeros, np.ones(5, np.float32)),
        (np.ones(5, np.float32), zeros),
        (np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)),
        (np.float32(3.0), np.float32(3.0 + 1e-4)),
        (np.full(4, 3e38, np.float32), np.full(4, -3e38, np.float32)),
    ]
    for tol in (TOL, Tolerance(rtol=0.0, atol=1e-9), Tolerance(rtol=1e-2, atol=1e-30)):
        for g, e in cases:
            fast = compare_arrays(g, e, tol)
            general = _compare_general(np.asarray(g, np.float64), np.asarray(e, np.float64), tol, fast.all_zero)
            assert fast == general, (g, e, tol)
    # non-finite values take the general way
    assert compare_arrays(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), TOL).passed
    assert not compare_arrays(np.array([np.inf, 1.0]), np.array([1.0, 1.0]), TOL).passed


def _offloaded(facts: list[ResidualFact], index: int) -> list[ResidualFact]:
    return [
        f.model_copy(update={"memory_kind": "pinned_host"}) if i == index else f.model_copy()
        for i, f in enumerate(facts)
    ]


def test_where_a_residual_is_kept_is_part_of_the_exact_rule() -> None:
    """A policy that should offload a value to host memory but keeps it on the device (or the other
    way round) saves the same values of the same shapes: only the memory kind tells them apart."""
    reference = _offloaded(REFERENCE_RESIDUALS, 2)
    same_values = [r.model_copy() for r in REFERENCE_RESIDUALS]  # all on the device
    run = run_with(same_values, values=values_of(same_values))
    run.expected.residuals = reference
    result = check_residuals([run], spec=rule_spec(rule="exact"))
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "f32[8,4] on pinned_host x1" in result.message and "[offloaded to pinned_host]" in result.message
    run = run_with(_offloaded(REFERENCE_RESIDUALS, 2), values=values_of(same_values))
    run.expected.residuals = reference
    assert check_residuals([run], spec=rule_spec(rule="exact")).passed


def test_an_author_can_accept_either_memory_kind_and_the_message_says_where_each_is_kept() -> None:
    reference = _offloaded(REFERENCE_RESIDUALS, 2)
    same_values = [r.model_copy() for r in REFERENCE_RESIDUALS]  # kept in device memory
    run = run_with(same_values, values=values_of(same_values))
    run.expected.residuals = reference
    result = check_residuals([run], spec=rule_spec(rule="exact"))
    assert "keeps them in other memory" in result.message
    assert "f32[8,4] in device memory x1" in result.message  # where the student's value is
    assert "unpinned_host" in result.message  # the offload JAX lowers to device memory
    relaxed = rule_spec(rule="exact", compare_kinds=False)
    for submitted in (same_values, _offloaded(REFERENCE_RESIDUALS, 2), _offloaded(REFERENCE_RESIDUALS, 0)):
        run = run_with([r.model_copy() for r in submitted], values=values_of(same_values))
        run.expected.residuals = reference
        assert check_residuals([run], spec=relaxed).passed, submitted
    other = [residual([4, 4]), residual([8, 4]), residual([8, 4])]  # other values: still matched
    run = run_with(other, values=values_of(other, seed=3))
    run.expected.residuals = reference
    assert not check_residuals([run], spec=relaxed).passed


def test_at_most_counts_the_bytes_kept_on_the_device() -> None:
    bigger = [*[r.model_copy() for r in REFERENCE_RESIDUALS], residual([16, 4])]
    assert not check_residuals([run_with(bigger)], spec=rule_spec(rule="at_most")).passed
    offloaded = _offloaded(bigger, 3)  # the extra 256 bytes go to host memory: the device holds no more
    result = check_residuals([run_with(offloaded)], spec=rule_spec(rule="at_most"))
    assert result.passed and result.details["small"]["submitted_host_bytes"] == 256


def recomputing(run: CaseRun, flops: int, *, low: int | None = None, named: str = "") -> CaseRun:
    """`run` whose backward pass redoes `flops` FLOPs of forward work (all of it one operation,
    labelled `named`, when given)."""
    by_signature = {"sig-dot": flops} if named else {}
    run.bwd_recompute = RecomputeFigures(
        flops=flops,
        flops_low=flops if low is None else low,
        named={"sig-dot": named} if named else {},
        by_signature=by_signature,
    )
    return run


def test_recomputing_forward_work_beyond_the_policy_is_wrong_policy_within_a_stated_slack() -> None:
    spec = rule_spec(rule="exact")
    run = recomputing(run_with([r.model_copy() for r in REFERENCE_RESIDUALS]), 400)
    run.expected.bwd_largest_value_elements = 32
    run.expected.bwd_recompute_flops = 400
    assert check_recompute([run], rule=spec.memory).passed  # the same forward work
    recomputing(run, 400 + 100 + 2 * 32)  # the slack: 25% and two passes over the largest value
    assert check_recompute([run], rule=spec.memory).passed
    label = "dot_general(saved f32[8,4] (argument x), saved f32[4,4] (argument w)) -> f32[8,4]"
    recomputing(run, 39_400, named=label)
    result = check_recompute([run], rule=spec.memory)
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "recomputes 39,400 FLOPs of forward work" in result.message
    assert f"`{label}` (39,400 FLOPs, which the required policy does not recompute)" in result.message
    recomputing(run, 39_400, low=400, named=label)
    run.bwd_flops_exact = False  # a loop whose trip count could not be read: not judged
    assert check_recompute([run], rule=spec.memory).passed and not check_recompute([run], rule=spec.memory).judged
    run.bwd_flops_exact = True
    assert not check_recompute([run], rule=rule_spec(rule="at_most").memory).judged  # saving less may cost more


def test_forward_work_of_ones_own_writing_may_be_redone_up_to_what_the_forward_adds() -> None:
    """A ring all-gather of one-hot arithmetic redoes, in the backward pass, forward work the
    reference's `all_gather` does without FLOPs: allowed up to what its forward program costs beyond
    the reference's. A hand-written VJP that recomputes what the policy saves, its forward costing
    the reference's, gets nothing."""
    spec = rule_spec(rule="exact")
    run = run_with([r.model_copy() for r in REFERENCE_RESIDUALS])
    run.expected.bwd_largest_value_elements = 0
    run.expected.bwd_recompute_flops = 1_000
    run.expected.bwd_recomputed = {"sig-dot": 1_000}
    run.expected.fwd_flops = 1_000
    ring = {"sig-dot": 1_000, "sig-one-hot": 700}  # the same dot, and the ring's own arithmetic
    run.bwd_recompute = RecomputeFigures(flops=1_700, flops_low=1_700, by_signature=ring)
    run.fwd_flops_low = 1_700
    assert formulation_allowance(run) == 700
    result = check_recompute([run], rule=spec.memory)
    assert result.passed and "up to 700 FLOPs more were allowed" in result.message
    run.fwd_flops_low = 1_000  # the same arithmetic with a forward that costs the reference's: no allowance
    assert formulation_allowance(run) == 0 and not check_recompute([run], rule=spec.memory).passed
    run.fwd_flops_low = 1_300  # the allowance is what the forward adds, not all the own arithmetic
    assert formulation_allowance(run) == 300 and not check_recompute([run], rule=spec.memory).passed
    # recomputing an op the reference also recomputes gets no allowance however dear the forward
    run.bwd_recompute = RecomputeFigures(flops=2_000, flops_low=2_000, by_signature={"sig-dot": 2_000})
    run.fwd_flops_low = 5_000
    assert formulation_allowance(run) == 0 and not check_recompute([run], rule=spec.memory).passed
    run.expected.fwd_flops = None  # an expectation cached before the forward's FLOPs were kept
    assert formulation_allowance(run) == 0


def test_the_derivatives_own_arithmetic_is_not_recomputation() -> None:
    """A blocked mat-vec's backward pass adds up zero-padded gradient blocks: 1.5 times the
    reference's backward FLOPs in all (measured on checkpoint_each_layer, four column blocks), none
    of it forward work. Only the forward work redone is held to the policy's."""
    spec = rule_spec(rule="exact")
    run = recomputing(run_with([r.model_copy() for r in REFERENCE_RESIDUALS], name="large"), 4_557_312)
    run.expected.bwd_flops, run.expected.bwd_recompute_flops = 13_669_376, 4_557_312
    run.expected.bwd_residual_flops = 4_557_312
    run.bwd_flops, run.bwd_residual_flops = 20_517_248, 4_564_992
    result = check_recompute([run], rule=spec.memory)
    assert result.passed and result.judged
    assert result.details["large"]["submitted_bwd_flops"] == 20_517_248  # reported, not judged


def test_the_recompute_bound_is_judged_on_the_case_with_the_costliest_backward_pass() -> None:
    spec = rule_spec(rule="exact")
    small = recomputing(run_with([r.model_copy() for r in REFERENCE_RESIDUALS], name="small"), 120)
    large = recomputing(run_with([r.model_copy() for r in REFERENCE_RESIDUALS], name="large"), 1_000_000)
    small.expected.bwd_flops, large.expected.bwd_flops = 40, 2_000_000
    small.expected.bwd_recompute_flops, large.expected.bwd_recompute_flops = 40, 1_000_000
    result = check_recompute([small, large], rule=spec.memory)  # 3 times on a 40-FLOP case: how it is written
    assert result.passed and result.judged
    assert result.details["small"]["judged"] is False and result.details["large"]["judged"] is True
    assert "on large" in result.message
    recomputing(large, 1_400_000)  # 40% over on the case that decides
    result = check_recompute([small, large], rule=spec.memory)
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY and "'large'" in result.message
    recomputing(large, 1_000_000)
    large.bwd_flops_exact = False  # the deciding figure is inexact: not judged
    assert not check_recompute([small, large], rule=spec.memory).judged
    small.bwd_flops_exact, large.bwd_flops_exact = False, True  # an inexact reported case changes nothing
    assert check_recompute([small, large], rule=spec.memory).judged


def test_recomputing_saved_values_is_caught_by_the_work_on_the_residuals_alone() -> None:
    """A custom_vjp that recomputes a dense layer's matmul outputs in another form than the forward
    program's (so no op repeats one of the forward's): the work that reads no cotangent still
    grows a thousand times."""

    spec = rule_spec(rule="exact")
    run = recomputing(run_with([r.model_copy() for r in REFERENCE_RESIDUALS], name="large"), 0)
    run.expected.bwd_flops, run.expected.bwd_residual_flops = 9_116_544, 4_480
    run.expected.bwd_recompute_flops = 0
    run.expected.bwd_largest_value_elements = 786_432
    run.bwd_flops, run.bwd_residual_flops = 11_393_920, 4_559_232  # measured on mlp_dots_policy
    result = check_recompute([run], rule=spec.memory)
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "does not depend on the cotangent" in result.message and "4,559,232" in result.message
    run.bwd_residual_flops = 1_835_008 - 786_432 + 4_480  # a relu mask computed another way: allowed
    assert check_recompute([run], rule=spec.memory).passed


def test_a_branch_only_the_run_picks_is_judged_by_its_cheapest_side() -> None:
    """A data-dependent lax.cond makes the figure inexact; if even its cheapest branch recomputes
    too much, the check fails anyway instead of stepping aside."""

    spec = rule_spec(rule="exact")
    run = recomputing(run_with([r.model_copy() for r in REFERENCE_RESIDUALS], name="large"), 60_000, low=1_100)
    run.expected.bwd_recompute_flops = 1_000
    run.bwd_flops_exact = False  # the cheap side is within the bound: not judged
    result = check_recompute([run], rule=spec.memory)
    assert result.passed and not result.judged
    recomputing(run, 60_000, low=50_000)  # both sides recompute everything
    result = check_recompute([run], rule=spec.memory)
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY and "at least 50,000" in result.message
    run.expected.bwd_flops_exact = False  # the reference's own figure is inexact: nothing to hold it to
    assert check_recompute([run], rule=spec.memory).passed


def test_loop_counters_and_branch_indices_are_not_part_of_the_policy() -> None:
    """A fori_loop saves its counter (i32[] and i32[L]); a lax.cond on data its branch index: the
    reader marks them bookkeeping (`left_out`). The float residuals still match one to one, and an
    integer value the reader did not mark (a mask, an activation bitcast to small int32 pieces)
    counts like any other, whatever its size."""
    same = [r.model_copy() for r in REFERENCE_RESIDUALS]
    counters = [residual([], "int32"), residual([8], "int32")]
    for c in counters:
        c.left_out = LOOP_BOOKKEEPING
    with_counters = same + [c.model_copy() for c in counters]
    run = run_with(with_counters, values=values_of(with_counters))
    assert check_residuals([run], spec=rule_spec(rule="exact")).passed
    mask = residual([8, 4], "bool")
    run = run_with(same + [mask], values=values_of(same + [mask]))
    assert not check_residuals([run], spec=rule_spec(rule="exact")).passed
    for shape in ([1024], [256], [1]):  # unmarked integers count at any size
        disguised = residual(shape, "int32")
        run = run_with(same + [disguised], values=values_of(same + [disguised]))
        assert not check_residuals([run], spec=rule_spec(rule="exact")).passed
    short = same[:-1] + [c.model_copy() for c in counters]  # counters do not stand in for a value
    run = run_with(short, values=values_of(short))
    assert not check_residuals([run], spec=rule_spec(rule="exact")).passed


def test_bookkeeping_is_read_from_dependence_and_branch_use_never_from_dtype_alone() -> None:
    """`bookkeeping_reasons`: an integer no argument flows into is a loop counter; one that
    depends on the data is left out only when the backward pass only branches on it, and only up
    to MAX_BRANCH_INDEX_ELEMENTS in all; a float is never left out."""
    facts = [residual([], "int32"), residual([4], "int32"), residual([8, 4]), residual([], "int32")]
    reasons = bookkeeping_reasons(facts, [False, True, False, True], [False, False, False, True])
    assert reasons == [LOOP_BOOKKEEPING, None, None, BRANCH_BOOKKEEPING]
    assert bookkeeping_reasons(facts, [], []) == [None] * 4  # not read: nothing left out
    many = [residual([MAX_BRANCH_INDEX_ELEMENTS], "int32"), residual([1], "int32")]
    assert bookkeeping_reasons(many, [True, True], [True, True]) == [None, None]


def test_a_value_in_another_layout_is_the_same_residual() -> None:
    """A weight kept transposed (square or not) and an activation with an axis split hold the
    reference's numbers and bytes: the same residuals, said so on the panel."""
    w, x, z = values_of(REFERENCE_RESIDUALS)  # f32[4,4], f32[8,4], f32[8,4]
    layouts = [w.T.copy(), x.T.copy(), z.reshape(2, 4, 4).transpose(1, 0, 2).copy()]
    facts = [residual(list(v.shape)) for v in layouts]
    run = run_with(facts, values=layouts)
    result = check_residuals([run], spec=rule_spec(rule="exact"))
    assert result.passed, result.message
    assert all(f.matched and "in another layout" in (f.layout or "") for f in run.residuals)
    same = [r.model_copy() for r in REFERENCE_RESIDUALS]
    run = run_with(same, values=[w, x, z])
    assert check_residuals([run], spec=rule_spec(rule="exact")).passed
    assert all(f.layout is None for f in run.residuals)  # nothing to say of the reference's own layout


def test_other_reorderings_stay_other_values() -> None:
    """Reversed, rolled, shuffled or re-split across axes: the same numbers in another order, but
    not a layout, so not the value the policy saves."""
    w, x, z = values_of(REFERENCE_RESIDUALS)
    rng = np.random.default_rng(7)
    for other in (
        x[::-1].copy(),
        np.roll(x, 1, axis=0),
        rng.permutation(x.reshape(-1)).reshape(8, 4),
        x.reshape(4, 8),  # rows of 4 read as rows of 8: not an axis split
        np.flip(x, 1).T.copy(),
    ):
        facts = [residual([4, 4]), residual(list(other.shape)), residual([8, 4])]
        run = run_with(facts, values=[w, other.astype(np.float32), z])
        result = check_residuals([run], spec=rule_spec(rule="exact"))
        assert not result.passed and result.verdict is Verdict.WRONG_POLICY, other.shape


def test_the_layout_search_is_bounded_per_case() -> None:
    """Six axes of two: 720 orders to try. The search stops when the case's budget is spent (then
    only the reference's own layout is tried), counted in candidates, not seconds."""
    ref = np.random.default_rng(5).normal(size=(2,) * 6).astype(np.float32)
    got = ref.transpose(5, 4, 3, 2, 1, 0).copy()

    def equal(a: np.ndarray, b: np.ndarray) -> bool:
        return a.shape == b.shape and bool(np.allclose(a, b))

    assert find_layout(got, ref, equal) is not None
    spent = LayoutBudget(screens=5)
    assert find_layout(got, ref, equal, spent) is None and spent.screens == 0
    assert find_layout(ref.copy(), ref, equal, spent) is not None  # its own layout, budget or not


def test_the_peak_bound_has_a_calibrated_slack_when_the_same_values_are_saved() -> None:

    spec = rule_spec(rule="exact", bound_bwd_peak=True)
    same = [r.model_copy() for r in REFERENCE_RESIDUALS]
    run = run_with(same, bwd_peak_bytes=1000 + 120, expected_peak=1000)
    assert check_residuals([run], spec=spec).passed  # marks every value matched
    run.expected.bwd_largest_value_bytes = 64
    assert check_peak_memory([run], rule=spec.memory).passed  # within two of the largest values, 128 bytes
    run.bwd_peak_bytes = 1000 + 130
    result = check_peak_memory([run], rule=spec.memory)
    assert not result.passed and "since you save the same values" in result.message
    assert "recompute" not in result.message  # the saved values are right: recomputation is not blamed
    other = run_with(
        [residual([4, 4]), residual([8, 4]), residual([8, 4])],
        bwd_peak_bytes=1000 + 1,
        values=values_of([residual([4, 4]), residual([8, 4]), residual([8, 4])], seed=7),
    )
    check_residuals([other], spec=spec)
    other.expected.bwd_largest_value_bytes = 64
    assert not check_peak_memory([other], rule=spec.memory).passed  # other values: no calibrated slack


def test_layouts_that_split_an_axis_in_three_or_regroup_both_sides_are_found() -> None:
    """[B*T*H, e] against [B, H, T, e], and [B*T, H*e] against [B*H, T*e]: the same values."""
    bthe = np.random.default_rng(11).normal(size=(2, 5, 3, 4)).astype(np.float32)

    def equal(a: np.ndarray, b: np.ndarray) -> bool:
        return a.shape == b.shape and bool(np.allclose(a, b))

    assert find_layout(bthe.transpose(0, 2, 1, 3).copy(), bthe.reshape(30, 4), equal) is not None
    assert find_layout(bthe.transpose(0, 2, 1, 3).reshape(6, 20).copy(), bthe.reshape(10, 12), equal) is not None
    assert find_layout(np.flip(bthe, 1).reshape(30, 4).copy(), bthe.reshape(30, 4), equal) is None
