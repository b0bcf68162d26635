"""graders/checks: array comparison, values, gradients, residual signature and peak memory checks,
on hand-built CaseExpectation / CaseRun objects."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graders.artifacts import Aval
from graders.checks.common import CaseRun, compare_arrays
from graders.checks.gradients import check_gradients
from graders.checks.residuals import check_peak_memory, check_residuals
from graders.checks.values import check_values
from graders.problem import MemoryRule, ProblemSpec, Tolerance
from graders.reference import CaseExpectation
from graders.verdict import ResidualAval, Verdict

TOL = Tolerance(rtol=1e-4, atol=1e-5)


def residual(shape: list[int], dtype: str = "float32", note: str | None = None) -> ResidualAval:
    return ResidualAval(shape=shape, dtype=dtype, note=note)


def expectation(*, name: str = "small", residuals: list[ResidualAval] | None = None, bwd_peak_bytes: int = 1000,
                outputs: list[list[np.ndarray]] | None = None,
                gradients: list[list[np.ndarray]] | None = None) -> CaseExpectation:
    """A case of `f(w: float32[2, 2], x: float32[3, 2]) -> float32[]`."""
    return CaseExpectation(
        name=name, dims={"d": 2, "N": 3}, static={}, arg_specs=[],
        input_avals=[Aval((2, 2), "float32"), Aval((3, 2), "float32")],
        output_avals=[Aval((), "float32")],
        residuals=residuals if residuals is not None else [],
        fwd_peak_bytes=500, bwd_peak_bytes=bwd_peak_bytes,
        plain_residual_bytes=None, plain_bwd_peak_bytes=None,
        fd_step=1e-3, fd_reference_error=[0.0],
        outputs=outputs or [], gradients=gradients or [],
    )


@pytest.fixture(scope="module")
def spec() -> ProblemSpec:
    return ProblemSpec.model_validate({
        "slug": "tiny_problem", "title": "Tiny", "difficulty": "easy", "entry_point": "f",
        "args": [{"name": "w", "shape": ["d", "d"]}, {"name": "x", "shape": ["N", "d"]}],
        "cases": [{"name": "small", "dims": {"d": 2, "N": 3}}],
        "tolerance": {"float32": {"rtol": 1e-4, "atol": 1e-5}},
    })


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

REFERENCE_RESIDUALS = [residual([4, 4], note="from the argument w1"), residual([8, 4], note="from the argument x"),
                       residual([8, 4], note="output of dot_general")]


def run_with(submitted: list[ResidualAval], *, bwd_peak_bytes: int = 0, expected_peak: int = 1000,
             name: str = "small") -> CaseRun:
    return CaseRun(expected=expectation(name=name, residuals=REFERENCE_RESIDUALS, bwd_peak_bytes=expected_peak),
                   residuals=submitted, bwd_peak_bytes=bwd_peak_bytes)


def test_exact_rule_accepts_the_same_residuals_in_another_order() -> None:
    shuffled = [residual([8, 4]), residual([4, 4]), residual([8, 4])]
    result = check_residuals([run_with(shuffled)], rule=MemoryRule(rule="exact"))
    assert result.passed
    assert result.details["small"] == {"expected_count": 3, "submitted_count": 3,
                                       "expected_bytes": 64 + 128 + 128, "submitted_bytes": 320}


def test_exact_rule_rejects_a_missing_residual_and_lists_both_sides() -> None:
    result = check_residuals([run_with([residual([4, 4]), residual([8, 4])])], rule=MemoryRule(rule="exact"))
    assert not result.passed
    assert result.verdict is Verdict.WRONG_POLICY
    assert "not saved by yours: f32[8,4] x1" in result.message
    assert "expected: 3 residuals, 320 bytes" in result.message
    assert "yours: 2 residuals, 192 bytes" in result.message
    assert "output of dot_general" in result.message  # the expected listing keeps its notes


def test_exact_rule_rejects_an_extra_residual_with_the_same_bytes_elsewhere() -> None:
    # same total bytes (f32[8,4] == 2 x f32[4,4]) but a different signature
    submitted = [residual([4, 4]), residual([8, 4]), residual([4, 4]), residual([4, 4])]
    result = check_residuals([run_with(submitted)], rule=MemoryRule(rule="exact"))
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "not saved by yours: f32[8,4] x1" in result.message
    assert "saved by yours only: f32[4,4] x2" in result.message


def test_exact_rule_distinguishes_dtypes_of_the_same_shape() -> None:
    submitted = [residual([4, 4]), residual([8, 4]), residual([8, 4], dtype="bool")]
    result = check_residuals([run_with(submitted)], rule=MemoryRule(rule="exact"))
    assert not result.passed
    assert "saved by yours only: bool[8,4] x1" in result.message


def test_exact_rule_reports_the_first_failing_case_by_name() -> None:
    good = run_with(list(REFERENCE_RESIDUALS), name="small")
    bad = run_with([residual([4, 4])], name="large")
    result = check_residuals([good, bad], rule=MemoryRule(rule="exact"))
    assert not result.passed
    assert result.message.startswith("case 'large'")
    assert result.details["large"]["submitted_count"] == 1


def test_at_most_rule_accepts_fewer_residual_bytes() -> None:
    result = check_residuals([run_with([residual([4, 4])])], rule=MemoryRule(rule="at_most"))
    assert result.passed
    assert result.verdict is None


def test_at_most_rule_rejects_more_residual_bytes() -> None:
    submitted = REFERENCE_RESIDUALS + [residual([1], dtype="float32")]
    result = check_residuals([run_with(submitted)], rule=MemoryRule(rule="at_most"))
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "324 bytes" in result.message and "320 allowed" in result.message


def test_at_most_rule_respects_slack_bytes_inclusively() -> None:
    submitted = REFERENCE_RESIDUALS + [residual([4], dtype="float32")]  # 16 bytes over
    assert check_residuals([run_with(submitted)], rule=MemoryRule(rule="at_most", slack_bytes=16)).passed
    assert not check_residuals([run_with(submitted)], rule=MemoryRule(rule="at_most", slack_bytes=15)).passed


# --- check_peak_memory -------------------------------------------------------------------------------

def test_peak_at_most_fails_above_reference_peak_plus_slack() -> None:
    rule = MemoryRule(rule="at_most", slack_bytes=100)
    assert check_peak_memory([run_with(REFERENCE_RESIDUALS, bwd_peak_bytes=1100)], rule=rule).passed
    result = check_peak_memory([run_with(REFERENCE_RESIDUALS, bwd_peak_bytes=1101)], rule=rule)
    assert not result.passed and result.verdict is Verdict.WRONG_POLICY
    assert "1,101 bytes" in result.message and "1,000 bytes" in result.message
    assert result.details["small"]["submitted_bwd_peak_bytes"] == 1101


def test_peak_exact_rule_never_fails_and_reports_the_numbers() -> None:
    result = check_peak_memory([run_with(REFERENCE_RESIDUALS, bwd_peak_bytes=987_654)],
                               rule=MemoryRule(rule="exact"))
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
