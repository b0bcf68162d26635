"""The gradient check: the backward artifact against the reference's VJP (whose own gradients are
checked against finite differences in float64 once per problem version, `graders.reference.build`)."""

from __future__ import annotations

from graders.artifact_limits import is_differentiable
from graders.checks.check import Advice, CheckContext, Evidence, ScorePart
from graders.checks.comparison import CaseRun, compare_calibrated
from graders.problems.spec import ProblemSpec
from graders.reference.expectation import error_of
from graders.verdict import CheckResult, Verdict


def check_gradients(runs: list[CaseRun], *, spec: ProblemSpec, leaf_names: list[str]) -> CheckResult:
    """Compares the bwd artifact's gradients with the reference's VJP of the same random cotangent,
    under the tolerance calibrated on the reference's own float32 error (`compare_calibrated`).

    Returns:
        A "gradient" CheckResult; fails with WRONG_GRADIENT naming the argument whose gradient is
        wrong (and saying so when it is all zeros, the mark of a stray `stop_gradient`).
    """
    failure = None
    wrong_leaves: list[str] = []
    per_case = {}
    names = leaf_names
    for run in runs:
        bad_here: set[str] = set()
        # one gradient per float input leaf (integer leaves have none), in the inputs' order
        float_leaves = [(i, a) for i, a in enumerate(run.expected.input_avals) if is_differentiable(a.dtype)]
        names = [leaf_names[i] if i < len(leaf_names) else f"argument leaf {i}" for i, _ in float_leaves]
        for k, (got, want) in enumerate(zip(run.gradients, run.expected.gradients, strict=True)):
            for j, (g, w) in enumerate(zip(got, want, strict=True)):
                cmp = compare_calibrated(
                    g,
                    w,
                    error_of(run.expected.gradient_errors, k, j),
                    spec.tolerance_for(float_leaves[j][1].dtype),
                )
                if cmp.passed:
                    continue
                name = names[j]
                bad_here.add(name)
                if failure is None:
                    hint = (
                        f" It is all zeros: is `{name}` behind `jax.lax.stop_gradient`, or cut off from the output?"
                        if cmp.all_zero
                        else ""
                    )
                    failure = (
                        f"{run.label}, hidden input {k + 1} of {len(run.gradients)}: the gradient "
                        f"with respect to `{name}` differs from the expected one by up to "
                        f"{cmp.max_abs_diff:.4g} (largest expected magnitude "
                        f"{cmp.max_abs_expected:.4g}).{hint}"
                    )
        per_case[run.expected.name] = {"wrong_gradients": sorted(bad_here)}
        wrong_leaves += [n for n in sorted(bad_here) if n not in wrong_leaves]
    if failure:
        failure += f" Wrong gradients: {', '.join(wrong_leaves)}."
        return CheckResult(
            name="gradient", passed=False, message=failure, details=per_case, verdict=Verdict.WRONG_GRADIENT
        )
    return CheckResult(
        name="gradient",
        passed=True,
        message=f"gradients with respect to {', '.join(names)} match the reference for random cotangents",
        details=per_case,
    )


class GradientCheck:
    """The gradient check in the registry (`graders.checks.check.Check`): `check_gradients`."""

    name = "gradient"
    part: ScorePart = "gradient"
    headline = "Your gradients are wrong"

    def run(self, runs: list[CaseRun], context: CheckContext) -> CheckResult:
        return check_gradients(runs, spec=context.spec, leaf_names=context.leaf_names)

    def explain(self, evidence: Evidence) -> Advice:
        return Advice(evidence.message)
