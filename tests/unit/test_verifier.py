"""graders/verifier.py: verdicts, scores and residual reports for the real checkpoint_dot_policy problem,
with bundles built in-process by the runner (no jail) and the reference's expectations built once."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any, Callable

import jax.numpy as jnp
import pytest

from graders.problem import Problem
from graders.reference import Expectations, build_expectations
from graders.verdict import Verdict
from graders.verifier import VerifyLimits, VerifyResult, VersionMismatch, residual_report, score_of, verify
from sandbox.bundle import Bundle, parse_bundle
from jailside.export import export_case

SEED = b"unit-test-seed"


def f32_bytes(*shape: int) -> int:
    n = 4
    for d in shape:
        n *= d
    return n


def reference_residual_bytes(d: int, n: int) -> int:
    """dots_with_no_batch_dims_saveable on relu(x @ w1) @ w2: w1, w2, x and the two dot outputs."""
    return 2 * f32_bytes(d, d) + 3 * f32_bytes(n, d)


@pytest.fixture(scope="module")
def expectations(dot_problem: Problem) -> Expectations:
    """The reference exported and run on every case (three cases, one large): built once."""
    return build_expectations(dot_problem, seed=SEED)


@pytest.fixture(scope="module")
def raw_bundles(dot_problem: Problem, bundle_dict_of: Callable[[Problem, str], dict[str, Any]]) -> dict[str, dict]:
    """Bundle dicts of the reference and of the wrong submissions that export cleanly, built once."""
    files = ["reference.py", "wrong/no_checkpoint.py", "wrong/wrong_math.py", "wrong/stop_gradient_weight.py",
             "wrong/checkpoint_without_policy.py", "wrong/patched_saved_residuals.py"]
    return {name: bundle_dict_of(dot_problem, name) for name in files}


@pytest.fixture(scope="module")
def bundles(raw_bundles: dict[str, dict], parse_bundle_dict: Callable[[dict], Bundle]) -> dict[str, Bundle]:
    return {name: parse_bundle_dict(raw) for name, raw in raw_bundles.items()}


def judge(bundle: Bundle, problem: Problem, expectations: Expectations, **limits: Any) -> VerifyResult:
    return verify(bundle, problem, expectations, limits=VerifyLimits(**limits))


def check(result: VerifyResult, name: str):
    found = [c for c in result.checks if c.name == name]
    assert len(found) == 1, [c.name for c in result.checks]
    return found[0]


def forge(raw: dict[str, Any], **case_changes: Any) -> Bundle:
    """A copy of the bundle dict with the first case's fields replaced, parsed like untrusted bytes."""
    data = copy.deepcopy(raw)
    data["cases"][0].update(case_changes)
    return parse_bundle(json.dumps(data).encode(), limit_bytes=1 << 30)


# --- expectations ------------------------------------------------------------------------------------

def test_expectations_read_the_reference_residuals_from_its_artifacts(expectations: Expectations) -> None:
    assert [c.name for c in expectations.cases] == ["small", "rectangular", "large"]
    assert expectations.leaf_names == ["w1", "w2", "x"]
    for case in expectations.cases:
        d, n = case.dims["d"], case.dims["N"]
        assert sorted((tuple(r.shape), r.dtype) for r in case.residuals) == sorted(
            [((d, d), "float32")] * 2 + [((n, d), "float32")] * 3)
        assert case.residual_bytes == reference_residual_bytes(d, n)
        assert len(case.inputs) == len(case.outputs) == len(case.gradients) == 3
        # without jax.checkpoint the same function saves more (relu mask and more intermediates)
        assert case.plain_residual_bytes is not None and case.plain_residual_bytes > case.residual_bytes
        # provenance read from the reference's own artifact: the arguments and two matmul outputs
        assert sorted(r.source for r in case.residuals) == sorted(
            ["argument w1", "argument w2", "argument x", "dot_general", "dot_general"])
        assert len(case.residual_values) == 3 and len(case.residual_values[0]) == 5
        # everything recomputed saves only the inputs and redoes both matmuls in the backward pass
        assert case.full_remat_bytes == (2 * d * d + n * d) * 4
        assert case.recompute_flops(case.full_remat_bwd_flops) >= 2 * (2 * n * d * d)
        assert case.recompute_flops(case.bwd_flops) < 2 * n * d * d
        # the float32 reference's own error against its float64 evaluation: small, per leaf and input
        assert len(case.output_errors) == len(case.gradient_errors) == len(case.residual_errors) == 3
        assert len(case.gradient_errors[0]) == 3 and len(case.residual_errors[0]) == 5
        assert all(0 <= e < 1e-2 * (1 + float(abs(case.outputs[k][0]))) for k, es in enumerate(case.output_errors)
                   for e in es)


def test_expectations_of_another_version_are_refused(dot_problem: Problem, expectations: Expectations,
                                                     bundles: dict[str, Bundle]) -> None:
    stale = copy.copy(expectations)
    stale.version = "000000000000"
    with pytest.raises(VersionMismatch):
        judge(bundles["reference.py"], dot_problem, stale)


# --- the problem's own files --------------------------------------------------------------------------

def test_reference_is_accepted_with_full_score(dot_problem: Problem, expectations: Expectations,
                                               bundles: dict[str, Bundle]) -> None:
    result = judge(bundles["reference.py"], dot_problem, expectations)
    assert result.verdict is Verdict.ACCEPTED, [c.message for c in result.checks if not c.passed]
    assert result.score == 1.0
    assert all(c.passed for c in result.checks)
    assert [c.name for c in result.checks if not c.judged] == ["peak_memory"]  # reported only
    assert [c.name for c in result.checks] == ["module", "avals", "value", "gradient", "finite_difference",
                                               "residuals", "peak_memory"]
    report = result.residuals
    assert report is not None and report.case == "large"  # no case differs: the last (largest) is shown
    assert len(report.expected) == len(report.submitted) == 5
    assert report.expected_bytes == report.submitted_bytes == reference_residual_bytes(256, 1024)
    assert report.submitted_bwd_peak_bytes == report.expected_bwd_peak_bytes > 0
    assert all(r.note for r in report.submitted)  # the runner's notes agree with the artifact: kept


def test_no_checkpoint_is_wrong_policy_with_two_thirds_score(dot_problem: Problem, expectations: Expectations,
                                                             bundles: dict[str, Bundle]) -> None:
    result = judge(bundles["wrong/no_checkpoint.py"], dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_POLICY
    assert result.score == 0.67
    assert check(result, "value").passed and check(result, "gradient").passed
    residuals = check(result, "residuals")
    assert not residuals.passed
    assert "saved by yours only: bool[1024,256] x1, f32[1024,256] x1" in residuals.message
    assert residuals.message.startswith("case 'large'")  # the case the residual report shows
    report = result.residuals
    assert report is not None and report.case == "large"  # the differing case with the most bytes at stake
    assert (len(report.expected), len(report.submitted)) == (5, 7)
    # the relu mask bool[N, d] and one more float32[N, d] intermediate
    assert report.expected_bytes == reference_residual_bytes(256, 1024) == 3_670_016
    assert report.submitted_bytes == 3_670_016 + f32_bytes(1024, 256) + 1024 * 256
    assert report.no_checkpoint_bytes == report.submitted_bytes  # it IS the no-checkpoint variant


def test_checkpoint_without_policy_saves_too_little(dot_problem: Problem, expectations: Expectations,
                                                    bundles: dict[str, Bundle]) -> None:
    result = judge(bundles["wrong/checkpoint_without_policy.py"], dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_POLICY
    assert "not saved by yours: f32[1024,256] x2" in check(result, "residuals").message
    assert result.residuals is not None
    assert result.residuals.case == "large"
    assert (len(result.residuals.submitted), result.residuals.submitted_bytes) == (3, 2 * f32_bytes(256, 256)
                                                                                  + f32_bytes(1024, 256))


def test_patched_saved_residuals_cannot_fake_the_policy(dot_problem: Problem, expectations: Expectations,
                                                        bundles: dict[str, Bundle]) -> None:
    bundle = bundles["wrong/patched_saved_residuals.py"]
    assert bundle.cases[0].residual_notes is not None and len(bundle.cases[0].residual_notes) == 5  # the lie
    result = judge(bundle, dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_POLICY
    assert result.residuals is not None and len(result.residuals.submitted) == 7
    assert all(r.note is None for r in result.residuals.submitted)  # notes disagreeing with the artifact: dropped


def test_wrong_math_is_wrong_answer(dot_problem: Problem, expectations: Expectations,
                                    bundles: dict[str, Bundle]) -> None:
    result = judge(bundles["wrong/wrong_math.py"], dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_ANSWER
    assert result.score == 0.0
    value = check(result, "value")
    assert not value.passed and value.message.startswith("case 'small'")
    assert check(result, "residuals").passed  # the policy is right; the verdict is about the math
    assert result.residuals is not None
    assert result.residuals.submitted_bytes == result.residuals.expected_bytes


def test_stop_gradient_weight_is_wrong_gradient_naming_w2(dot_problem: Problem, expectations: Expectations,
                                                           bundles: dict[str, Bundle]) -> None:
    result = judge(bundles["wrong/stop_gradient_weight.py"], dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_GRADIENT
    assert result.score == 0.34
    assert check(result, "value").passed
    gradient = check(result, "gradient")
    assert not gradient.passed
    assert "`w2`" in gradient.message and "stop_gradient" in gradient.message
    assert gradient.details["large"] == {"wrong_gradients": ["w2"]}
    assert not check(result, "finite_difference").passed  # its own fwd depends on w2; its bwd says not


# --- forged bundles -----------------------------------------------------------------------------------

def test_forged_fwd_of_another_function_is_rejected_by_the_aval_check(dot_problem: Problem,
                                                                      expectations: Expectations,
                                                                      raw_bundles: dict[str, dict]) -> None:
    other_fwd, _, _ = export_case(lambda v: jnp.sum(v ** 2),
                                  [{"kind": "array", "name": "v", "shape": [7], "dtype": "float32"}])
    forged = forge(raw_bundles["reference.py"], fwd=base64.b64encode(other_fwd).decode())
    calls: list[int] = []
    result = verify(forged, dot_problem, expectations, limits=VerifyLimits(), on_execute=lambda: calls.append(1))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.score == 0.0
    assert [c.name for c in result.checks] == ["avals"]
    avals = result.checks[0]
    assert not avals.passed and "float32[7]" in avals.message and "not produced by the runner" in avals.message
    assert calls == []  # nothing untrusted ran


def test_forged_fwd_from_another_submission_does_not_match_the_bwd(dot_problem: Problem,
                                                                   expectations: Expectations,
                                                                   raw_bundles: dict[str, dict]) -> None:
    # right input avals, but its residuals (7 of them) are not what the reference's bwd takes (5)
    wrong_fwd = raw_bundles["wrong/no_checkpoint.py"]["cases"][0]["fwd"]
    forged = forge(raw_bundles["reference.py"], fwd=wrong_fwd)
    result = judge(forged, dot_problem, expectations)
    assert result.verdict is not Verdict.ACCEPTED
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert [c.name for c in result.checks] == ["avals"]
    assert "backward program" in result.checks[0].message


def test_forged_primal_output_count_is_not_accepted(dot_problem: Problem, expectations: Expectations,
                                                    raw_bundles: dict[str, dict]) -> None:
    result = judge(forge(raw_bundles["reference.py"], n_primal_outputs=0), dot_problem, expectations)
    assert result.verdict is not Verdict.ACCEPTED and result.score == 0.0
    assert [c.name for c in result.checks] == ["avals"]


def test_forged_garbage_artifact_is_runtime_error(dot_problem: Problem, expectations: Expectations,
                                                  raw_bundles: dict[str, dict]) -> None:
    result = judge(forge(raw_bundles["reference.py"], bwd="Z2FyYmFnZQ=="), dot_problem, expectations)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.checks[0].name == "module" and "not a valid exported program" in result.checks[0].message


def test_bundle_with_missing_or_reordered_cases_is_runtime_error(dot_problem: Problem, expectations: Expectations,
                                                                 bundles: dict[str, Bundle]) -> None:
    ref = bundles["reference.py"]
    for cases in (ref.cases[:2], list(reversed(ref.cases))):
        forged = ref.model_copy(update={"cases": cases})
        result = judge(forged, dot_problem, expectations)
        assert result.verdict is Verdict.RUNTIME_ERROR
        assert [c.name for c in result.checks] == ["module"]
        assert "expected ['small', 'rectangular', 'large']" in result.checks[0].message


# --- limits ---------------------------------------------------------------------------------------------

def test_artifact_over_the_size_cap_is_rejected_before_running(dot_problem: Problem, expectations: Expectations,
                                                               bundles: dict[str, Bundle]) -> None:
    ref = bundles["reference.py"]
    cap = len(ref.cases[0].fwd) - 1
    result = judge(ref, dot_problem, expectations, max_artifact_bytes=cap)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.checks[0].name == "module" and f"{cap:,} allowed" in result.checks[0].message


def test_static_peak_over_the_cap_is_memory_limit_exceeded(dot_problem: Problem, expectations: Expectations,
                                                           bundles: dict[str, Bundle]) -> None:
    # the large case's backward pass holds megabytes; the small ones fit in 64 KiB
    result = judge(bundles["reference.py"], dot_problem, expectations, max_peak_live_bytes=64 * 1024)
    assert result.verdict is Verdict.MEMORY_LIMIT_EXCEEDED
    assert result.checks[0].name == "module" and "case 'large'" in result.checks[0].message


def test_op_count_over_the_cap_is_rejected(dot_problem: Problem, expectations: Expectations,
                                           bundles: dict[str, Bundle]) -> None:
    result = judge(bundles["reference.py"], dot_problem, expectations, max_ops=3)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "more operations than the 3 allowed" in result.checks[0].message


# --- score_of and residual_report ------------------------------------------------------------------------

def test_score_counts_policy_only_when_gradients_pass(dot_problem: Problem, expectations: Expectations,
                                                      bundles: dict[str, Bundle]) -> None:
    checks = judge(bundles["reference.py"], dot_problem, expectations).checks
    assert score_of(checks, dot_problem) == 1.0
    flipped = [c.model_copy(update={"passed": c.name != "gradient"}) for c in checks]
    assert score_of(flipped, dot_problem) == 0.34  # residuals pass, but a policy is worth nothing without gradients
    no_value = [c.model_copy(update={"passed": c.name != "value"}) for c in checks]
    assert score_of(no_value, dot_problem) == 0.0


def test_residual_report_of_no_runs_is_none() -> None:
    assert residual_report([]) is None
