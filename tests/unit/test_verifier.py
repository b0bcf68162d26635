"""graders/verifier/verify.py: verdicts, scores and residual reports for the real checkpoint_dot_policy problem,
with bundles built in-process by the runner (no jail) and the reference's expectations built once."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

from graders.artifact_limits import VerifyLimits
from graders.checks.registry import CHECKS, score_of
from graders.problems.problem import Problem
from graders.reference.build import build_expectations, ensure_expectations
from graders.reference.expectation import ARRAY_FIELDS, Expectations, cache_dir
from graders.reference.expectation_files import load_expectations, save_expectations
from graders.verdict import Verdict
from graders.verifier.report import residual_report
from graders.verifier.verify import VerifyResult, VersionMismatch, verify
from jailside.export import export_case
from sandbox.bundle import Bundle, parse_bundle

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
    files = [
        "reference.py",
        "wrong/no_checkpoint.py",
        "wrong/wrong_math.py",
        "wrong/stop_gradient_weight.py",
        "wrong/checkpoint_without_policy.py",
        "wrong/patched_saved_residuals.py",
    ]
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


def to_bundle(raw: dict[str, Any]) -> Bundle:
    """The bundle dict parsed like untrusted bytes."""
    return parse_bundle(json.dumps(raw).encode(), limit_bytes=1 << 30)


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
            [((d, d), "float32")] * 2 + [((n, d), "float32")] * 3
        )
        assert case.residual_bytes == reference_residual_bytes(d, n)
        assert len(case.inputs) == len(case.outputs) == len(case.gradients) == 3
        # without jax.checkpoint the same function saves more (relu mask and more intermediates)
        assert case.plain_residual_bytes is not None and case.plain_residual_bytes > case.residual_bytes
        # provenance read from the reference's own artifact: the arguments and two matmul outputs
        assert sorted(r.source for r in case.residuals) == sorted(
            ["argument w1", "argument w2", "argument x", "dot_general", "dot_general"]
        )
        assert len(case.residual_values) == 3 and len(case.residual_values[0]) == 5
        # everything recomputed saves only the inputs and redoes both matmuls in the backward pass
        assert case.full_remat_bytes == (2 * d * d + n * d) * 4
        assert case.full_remat_recompute_flops is not None and case.bwd_recompute_flops is not None
        assert case.full_remat_recompute_flops >= 2 * (2 * n * d * d)
        assert case.bwd_recompute_flops < 2 * n * d * d  # the relu, not a product
        assert case.plain_recompute_flops == 0  # without a checkpoint nothing is done twice
        # the float32 reference's own error against its float64 evaluation: small, per leaf and input
        assert len(case.output_errors) == len(case.gradient_errors) == len(case.residual_errors) == 3
        assert len(case.gradient_errors[0]) == 3 and len(case.residual_errors[0]) == 5
        assert all(
            0 <= e < 1e-2 * (1 + float(abs(case.outputs[k][0]))) for k, es in enumerate(case.output_errors) for e in es
        )


def test_expectations_of_another_version_are_refused(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    stale = copy.copy(expectations)
    stale.version = "000000000000"
    with pytest.raises(VersionMismatch):
        judge(bundles["reference.py"], dot_problem, stale)


# --- the problem's own files --------------------------------------------------------------------------


def test_reference_is_accepted_with_full_score(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    result = judge(bundles["reference.py"], dot_problem, expectations)
    assert result.verdict is Verdict.ACCEPTED, [c.message for c in result.checks if not c.passed]
    assert result.score == 1.0
    assert result.checks and all(c.passed for c in result.checks)
    assert [c.name for c in result.checks] == ["module", "avals", *(c.name for c in CHECKS)]  # every check ran
    assert [c.name for c in result.checks if not c.judged] == ["peak_memory"]  # reported only
    assert [c.name for c in result.checks] == [
        "module",
        "avals",
        "value",
        "gradient",
        "residuals",
        "peak_memory",
        "recompute",
    ]
    report = result.residuals
    assert report is not None and report.case == "large"  # no case differs: the last (largest) is shown
    assert len(report.expected) == len(report.submitted) == 5
    assert report.expected_bytes == report.submitted_bytes == reference_residual_bytes(256, 1024)
    assert report.submitted_bwd_peak_bytes == report.expected_bwd_peak_bytes > 0
    assert all(r.note for r in report.submitted)  # the runner's notes agree with the artifact: kept


def test_no_checkpoint_is_wrong_policy_with_two_thirds_score(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
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


def test_checkpoint_without_policy_saves_too_little(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    result = judge(bundles["wrong/checkpoint_without_policy.py"], dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_POLICY
    assert "not saved by yours: f32[1024,256] x2" in check(result, "residuals").message
    assert result.residuals is not None
    assert result.residuals.case == "large"
    assert (len(result.residuals.submitted), result.residuals.submitted_bytes) == (
        3,
        2 * f32_bytes(256, 256) + f32_bytes(1024, 256),
    )


def test_patched_saved_residuals_cannot_fake_the_policy(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    bundle = bundles["wrong/patched_saved_residuals.py"]
    assert bundle.cases[0].residual_notes is not None and len(bundle.cases[0].residual_notes) == 5  # the lie
    result = judge(bundle, dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_POLICY
    assert result.residuals is not None and len(result.residuals.submitted) == 7
    assert all(r.note is None for r in result.residuals.submitted)  # notes disagreeing with the artifact: dropped


def test_wrong_math_is_wrong_answer(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    result = judge(bundles["wrong/wrong_math.py"], dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_ANSWER
    assert result.score == 0.0
    value = check(result, "value")
    assert not value.passed and value.message.startswith("case 'small'")
    assert check(result, "residuals").passed  # the policy is right; the verdict is about the math
    assert result.residuals is not None
    assert result.residuals.submitted_bytes == result.residuals.expected_bytes


def test_stop_gradient_weight_is_wrong_gradient_naming_w2(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    result = judge(bundles["wrong/stop_gradient_weight.py"], dot_problem, expectations)
    assert result.verdict is Verdict.WRONG_GRADIENT
    assert result.score == 0.34
    assert check(result, "value").passed
    gradient = check(result, "gradient")
    assert not gradient.passed
    assert "`w2`" in gradient.message and "stop_gradient" in gradient.message
    assert gradient.details["large"] == {"wrong_gradients": ["w2"]}


# --- forged bundles -----------------------------------------------------------------------------------


def test_forged_fwd_of_another_function_is_rejected_by_the_aval_check(
    dot_problem: Problem, expectations: Expectations, raw_bundles: dict[str, dict]
) -> None:
    other_fwd, _, _ = export_case(
        lambda v: jnp.sum(v**2), [{"kind": "array", "name": "v", "shape": [7], "dtype": "float32"}]
    )
    forged = forge(raw_bundles["reference.py"], fwd=base64.b64encode(other_fwd).decode())
    calls: list[int] = []
    result = verify(forged, dot_problem, expectations, limits=VerifyLimits(), on_execute=lambda: calls.append(1))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.score == 0.0
    assert [c.name for c in result.checks] == ["avals"]
    avals = result.checks[0]
    assert not avals.passed and "float32[7]" in avals.message and "not produced by the runner" in avals.message
    assert calls == []  # nothing untrusted ran


def test_forged_fwd_from_another_submission_does_not_match_the_bwd(
    dot_problem: Problem, expectations: Expectations, raw_bundles: dict[str, dict]
) -> None:
    # right input avals, but its residuals (7 of them) are not what the reference's bwd takes (5)
    wrong_fwd = raw_bundles["wrong/no_checkpoint.py"]["cases"][0]["fwd"]
    forged = forge(raw_bundles["reference.py"], fwd=wrong_fwd)
    result = judge(forged, dot_problem, expectations)
    assert result.verdict is not Verdict.ACCEPTED
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert [c.name for c in result.checks] == ["avals"]
    assert "backward program" in result.checks[0].message


def test_forged_primal_output_count_is_not_accepted(
    dot_problem: Problem, expectations: Expectations, raw_bundles: dict[str, dict]
) -> None:
    result = judge(forge(raw_bundles["reference.py"], n_primal_outputs=0), dot_problem, expectations)
    assert result.verdict is not Verdict.ACCEPTED and result.score == 0.0
    assert [c.name for c in result.checks] == ["avals"]


def test_forged_garbage_artifact_is_runtime_error(
    dot_problem: Problem, expectations: Expectations, raw_bundles: dict[str, dict]
) -> None:
    result = judge(forge(raw_bundles["reference.py"], bwd="Z2FyYmFnZQ=="), dot_problem, expectations)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.checks[0].name == "module" and "not a valid exported program" in result.checks[0].message


def test_bundle_with_missing_or_reordered_cases_is_runtime_error(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    ref = bundles["reference.py"]
    for cases in (ref.cases[:2], list(reversed(ref.cases))):
        forged = ref.model_copy(update={"cases": cases})
        result = judge(forged, dot_problem, expectations)
        assert result.verdict is Verdict.RUNTIME_ERROR
        assert [c.name for c in result.checks] == ["module"]
        assert "expected ['small', 'rectangular', 'large']" in result.checks[0].message


# --- limits ---------------------------------------------------------------------------------------------


def test_artifact_over_the_size_cap_is_rejected_before_running(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    ref = bundles["reference.py"]
    cap = len(ref.cases[0].fwd) - 1
    result = judge(ref, dot_problem, expectations, max_artifact_bytes=cap)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.checks[0].name == "module" and f"{cap:,} allowed" in result.checks[0].message


def test_static_peak_over_the_cap_is_memory_limit_exceeded(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    # the large case's backward pass holds megabytes; the small ones fit in 64 KiB
    result = judge(bundles["reference.py"], dot_problem, expectations, max_peak_live_bytes=64 * 1024)
    assert result.verdict is Verdict.MEMORY_LIMIT_EXCEEDED
    assert result.checks[0].name == "module" and "case 'large'" in result.checks[0].message


def test_op_count_over_the_cap_is_rejected(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    result = judge(bundles["reference.py"], dot_problem, expectations, max_ops=3)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "more operations than the 3 allowed" in result.checks[0].message


# --- score_of and residual_report ------------------------------------------------------------------------


def test_score_counts_policy_only_when_gradients_pass(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    checks = judge(bundles["reference.py"], dot_problem, expectations).checks
    assert score_of(checks, dot_problem.spec.scoring) == 1.0
    flipped = [c.model_copy(update={"passed": c.name != "gradient"}) for c in checks]
    assert (
        score_of(flipped, dot_problem.spec.scoring) == 0.34
    )  # residuals pass, but a policy is worth nothing without gradients
    no_value = [c.model_copy(update={"passed": c.name != "value"}) for c in checks]
    assert score_of(no_value, dot_problem.spec.scoring) == 0.0


def test_residual_report_of_no_runs_is_none() -> None:
    assert residual_report([]) is None


# --- one compiled program per submission ---------------------------------------------------------------


def test_a_submission_is_compiled_into_two_executables_for_all_cases(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    import jax
    from jax._src import dispatch, monitoring

    compiles: list[float] = []

    def listener(event: str, duration: float, **_: Any) -> None:
        if event == dispatch.BACKEND_COMPILE_EVENT:
            compiles.append(duration)

    monitoring.register_event_duration_secs_listener(listener)
    try:
        jax.clear_caches()
        result = judge(bundles["reference.py"], dot_problem, expectations)
    finally:
        monitoring.unregister_event_duration_listener(listener)
    assert result.verdict is Verdict.ACCEPTED
    assert len(compiles) == 2  # three cases: every fwd in one, every bwd in one


def test_submission_values_equal_the_references_own_exactly(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    """The reference's bundle is judged the way its expectations were computed: the same bits."""
    from graders.reference.self_checks import FD_TOLERANCE
    from graders.verifier.verify import _execute, _load_case

    loaded = [
        _load_case(e, c, dot_problem, VerifyLimits(), expectations.leaf_names)
        for e, c in zip(expectations.cases, bundles["reference.py"].cases, strict=True)
    ]
    for run in _execute(loaded, VerifyLimits(), dot_problem, expectations.leaf_names):
        exp = run.expected
        for got, want in (
            (run.outputs, exp.outputs),
            (run.gradients, exp.gradients),
            (run.residual_values, exp.residual_values),
        ):
            assert got and all(
                np.array_equal(g, w) for gs, ws in zip(got, want, strict=True) for g, w in zip(gs, ws, strict=True)
            )
        assert exp.fd_reference_error and max(exp.fd_reference_error) < FD_TOLERANCE  # its float64 self-check


def _forge_case(raw: dict[str, Any], index: int, field: str, change: Callable[[Any], Any]) -> Bundle:
    """The bundle with case `index`'s artifact `field` deserialized, changed and serialized again."""
    from graders.untrusted.parse import deserialize

    data = copy.deepcopy(raw)
    exported = deserialize(base64.b64decode(data["cases"][index][field]))
    data["cases"][index][field] = base64.b64encode(bytes(change(exported).serialize())).decode()
    return parse_bundle(json.dumps(data).encode(), limit_bytes=1 << 30)


def test_an_artifact_failing_to_lower_is_a_runtime_error_naming_its_case(
    dot_problem: Problem, expectations: Expectations, raw_bundles: dict[str, dict]
) -> None:
    # the same module and avals, but told to keep only its first input: it cannot be called
    forged = _forge_case(
        raw_bundles["reference.py"], 1, "fwd", lambda e: dataclasses.replace(e, module_kept_var_idx=(0,))
    )
    calls: list[str] = []
    result = verify(
        forged,
        dot_problem,
        expectations,
        limits=VerifyLimits(),
        on_digest=lambda d: calls.append("digest"),
        on_execute=lambda: calls.append("execute"),
    )
    assert calls == ["digest", "execute"]
    assert result.verdict is Verdict.RUNTIME_ERROR and result.score == 0.0
    execute = check(result, "execute")
    assert execute.message.startswith("case 'rectangular': your exported program failed to run")


def test_an_artifact_failing_while_traced_names_its_case() -> None:
    import jax

    from graders.verifier.evaluate import ArtifactRunError, CaseData, evaluate_cases

    class Artifact:
        """Stands for an Exported: `call` is what tracing the artifact runs."""

        def __init__(self, n_in: int, fail: bool = False):
            self.in_tree = jax.tree_util.tree_structure((tuple(range(n_in)), {}))
            self.fail = fail

        def call(self, x: Any, *more: Any) -> Any:
            if self.fail:
                raise ValueError("a forged artifact")
            return [jnp.sin(x), jnp.cos(x)] if not more else [x * more[0]]

    x = [np.ones(3, np.float32)]

    def case(fail: bool) -> CaseData:
        return CaseData(
            fwd=Artifact(1), bwd=Artifact(2, fail), n_out=1, inputs=[x], cotangents=[x], directions=[x], step=1e-3
        )

    assert len(evaluate_cases([case(False), case(False)])[1].gradients) == 1
    with pytest.raises(ArtifactRunError, match="ValueError: a forged artifact") as raised:
        evaluate_cases([case(False), case(True), case(True)])
    assert raised.value.case == 1


def test_a_fault_of_our_own_code_is_not_blamed_on_the_submission(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle], monkeypatch: pytest.MonkeyPatch
) -> None:
    from graders.checks.gradients import GradientCheck

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug of the judge")

    monkeypatch.setattr(GradientCheck, "run", broken)  # our code, after the artifacts ran
    with pytest.raises(RuntimeError, match="a bug of the judge"):
        judge(bundles["reference.py"], dot_problem, expectations)


# --- on_digest: the bundle's content key ---------------------------------------------------------------


def digest_of(bundle: Bundle, problem: Problem, expectations: Expectations) -> list[str]:
    events: list[str] = []
    verify(
        bundle,
        problem,
        expectations,
        limits=VerifyLimits(),
        on_digest=lambda d: events.append(d),
        on_execute=lambda: events.append("execute"),
    )
    return events


def test_on_digest_is_called_once_before_anything_runs(
    dot_problem: Problem, expectations: Expectations, raw_bundles: dict[str, dict]
) -> None:
    events = digest_of(to_bundle(raw_bundles["reference.py"]), dot_problem, expectations)
    assert len(events) == 2 and events[1] == "execute"
    assert len(events[0]) == 64 and int(events[0], 16) >= 0
    assert digest_of(to_bundle(raw_bundles["reference.py"]), dot_problem, expectations) == events


def test_the_digest_ignores_comments_but_not_the_notes_or_the_policy(
    dot_problem: Problem,
    expectations: Expectations,
    raw_bundles: dict[str, dict],
    request_for: Callable[[Problem, str], dict[str, Any]],
) -> None:
    from jailside.runner import run_request

    reference = digest_of(to_bundle(raw_bundles["reference.py"]), dot_problem, expectations)[0]
    source = (dot_problem.root / "reference.py").read_text()
    commented = run_request(request_for(dot_problem, source + "\n# a comment at the end\n"))
    assert digest_of(to_bundle(commented), dot_problem, expectations)[0] == reference
    # notes name source lines and are part of the report: other notes, another key
    assert digest_of(forge(raw_bundles["reference.py"], residual_notes=None), dot_problem, expectations)[0] != reference
    assert digest_of(to_bundle(raw_bundles["wrong/no_checkpoint.py"]), dot_problem, expectations)[0] != reference


def test_on_digest_is_not_called_when_a_case_fails_to_load(
    dot_problem: Problem, expectations: Expectations, raw_bundles: dict[str, dict]
) -> None:
    events = digest_of(forge(raw_bundles["reference.py"], bwd="Z2FyYmFnZQ=="), dot_problem, expectations)
    assert events == []


# --- the expectation cache -------------------------------------------------------------------------------


def test_cached_expectations_round_trip_as_read_only_mapped_arrays(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle], tmp_path: Path
) -> None:
    save_expectations(expectations, tmp_path / "entry")
    loaded = load_expectations(tmp_path / "entry")
    assert loaded is not None
    for want, got in zip(expectations.cases, loaded.cases, strict=True):
        assert (got.name, got.residuals, got.input_avals, got.output_avals) == (
            want.name,
            want.residuals,
            want.input_avals,
            want.output_avals,
        )
        assert (got.fd_reference_error, got.gradient_errors, got.bwd_flops) == (
            want.fd_reference_error,
            want.gradient_errors,
            want.bwd_flops,
        )
        for name in ARRAY_FIELDS:
            for gs, ws in zip(getattr(got, name), getattr(want, name), strict=True):
                for g, w in zip(gs, ws, strict=True):
                    assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w)
                    assert not g.flags.writeable
    with pytest.raises(ValueError):
        loaded.cases[0].inputs[0][0][...] = 0  # read-only: a check cannot change the reference
    result = judge(bundles["reference.py"], dot_problem, loaded)  # the checks' numpy on mapped arrays
    assert result.verdict is Verdict.ACCEPTED and result.score == 1.0


def _corrupt_data(entry: Path) -> None:
    data = bytearray((entry / "arrays.bin").read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit in the middle of the arrays
    (entry / "arrays.bin").write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage", ["truncated", "one_bit", "meta_of_another_build", "garbage_meta", "empty_data", "no_data", "wrong_types"]
)
def test_damaged_cache_entries_are_refused(expectations: Expectations, tmp_path: Path, damage: str) -> None:
    entry = tmp_path / "entry"
    save_expectations(expectations, entry)
    meta = entry / "meta.json"
    if damage == "truncated":
        with open(entry / "arrays.bin", "r+b") as f:
            f.truncate(f.seek(0, 2) - 100)
    elif damage == "one_bit":
        _corrupt_data(entry)
    elif damage == "meta_of_another_build":
        meta.write_text(meta.read_text().replace('"fd_step": 1e-09', '"fd_step": 2e-09', 1))
    elif damage == "garbage_meta":
        meta.write_text(meta.read_text()[:1000])
    elif damage == "empty_data":
        (entry / "arrays.bin").write_bytes(b"")
    elif damage == "no_data":
        (entry / "arrays.bin").unlink()
    else:
        doc = json.loads(meta.read_text())
        doc["cases"][0]["inputs"] = 7
        meta.write_text(json.dumps(doc))
    assert load_expectations(entry) is None


def test_a_damaged_cache_entry_is_rebuilt(
    dot_problem: Problem, expectations: Expectations, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import graders.reference.build

    entry = cache_dir(tmp_path, dot_problem, SEED)
    save_expectations(expectations, entry)
    _corrupt_data(entry)
    built: list[int] = []

    def build(problem: Problem, *, seed: bytes, **limits: Any) -> Expectations:
        built.append(1)
        return expectations

    monkeypatch.setattr(graders.reference.build, "build_expectations", build)
    assert ensure_expectations(dot_problem, seed=SEED, cache_root=tmp_path) is expectations
    assert built == [1]
    assert load_expectations(entry) is not None  # rewritten whole
    assert ensure_expectations(dot_problem, seed=SEED, cache_root=tmp_path) is not expectations
    assert built == [1]  # read from the cache now


def test_cases_past_the_memory_budget_get_programs_of_their_own(
    dot_problem: Problem, expectations: Expectations, bundles: dict[str, Bundle]
) -> None:
    """A program's cases may all hold their peak at once: the cases' static peaks must add up to
    no more than one artifact may hold, and splitting them changes no value."""
    from jax._src import dispatch, monitoring

    from graders.verifier.evaluate import CaseData, _groups

    def case(peak: int, n_inputs: int = 3) -> CaseData:
        return CaseData(
            fwd=None,
            bwd=None,
            n_out=1,
            inputs=[[]] * n_inputs,
            cotangents=[],
            directions=[],
            step=1e-3,
            peak_bytes=peak,
        )

    assert _groups([case(10), case(10), case(10)], None) == [[0, 1, 2]]
    assert _groups([case(10), case(10), case(10)], 25) == [[0, 1], [2]]
    assert _groups([case(30), case(10), case(10, n_inputs=2)], 25) == [[0], [1], [2]]

    compiles: list[float] = []

    def listener(event: str, duration: float, **_: Any) -> None:
        if event == dispatch.BACKEND_COMPILE_EVENT:
            compiles.append(duration)

    # a budget the large case fills alone: small and rectangular share programs, large gets its own
    budget = max(max(e.fwd_peak_bytes, e.bwd_peak_bytes) for e in expectations.cases)
    monitoring.register_event_duration_secs_listener(listener)
    try:
        result = verify(
            bundles["reference.py"], dot_problem, expectations, limits=VerifyLimits(max_peak_live_bytes=budget)
        )
    finally:
        monitoring.unregister_event_duration_listener(listener)
    assert len(compiles) == 4
    assert result.verdict is Verdict.ACCEPTED and result.score == 1.0
    from graders.verifier.verify import _execute, _load_case

    loaded = [
        _load_case(e, c, dot_problem, VerifyLimits(), expectations.leaf_names)
        for e, c in zip(expectations.cases, bundles["reference.py"].cases, strict=True)
    ]
    together, apart = (
        _execute(loaded, VerifyLimits(), dot_problem, expectations.leaf_names),
        _execute(loaded, VerifyLimits(max_peak_live_bytes=budget), dot_problem, expectations.leaf_names),
    )
    assert together
    for a, b in zip(together, apart, strict=True):
        assert (
            a.outputs
            and a.gradients
            and all(
                np.array_equal(x, y)
                for xs, ys in zip(a.gradients + a.outputs, b.gradients + b.outputs, strict=True)
                for x, y in zip(xs, ys, strict=True)
            )
        )
