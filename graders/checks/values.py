"""The value check: the submission's primal outputs against the reference's on hidden inputs."""

from __future__ import annotations

from graders.checks.check import Advice, CheckContext, Evidence, ScorePart
from graders.checks.comparison import CaseRun, compare_calibrated
from graders.problems.spec import ProblemSpec
from graders.reference.expectation import error_of
from graders.verdict import CheckResult, Verdict


def check_values(runs: list[CaseRun], *, spec: ProblemSpec) -> CheckResult:
    """Compares primal outputs on every case and hidden input.

    Each output is compared with the reference's under a tolerance calibrated on the float32
    reference's own error against its float64 evaluation (`compare_calibrated`).

    Args:
        runs: one CaseRun per case, with `outputs` filled in.
        spec: the problem (the fixed tolerance per dtype, the floor of the calibrated one).

    Returns:
        A "value" CheckResult that fails with WRONG_ANSWER on the first mismatch it reports, with
        the worst one's size and place when it is more than twice as far off (a small case that only
        just fails would understate an error a larger case shows a thousand times over).
    """
    per_case = {}
    failure = None
    worst_failing: tuple[float, str] = (0.0, "")  # (times the tolerance, where) of the worst mismatch
    for run in runs:
        worst = 0.0
        for k, (got, want) in enumerate(zip(run.outputs, run.expected.outputs, strict=True)):
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                avals = run.expected.output_avals[i]
                cmp = compare_calibrated(
                    g, w, error_of(run.expected.output_errors, k, i), spec.tolerance_for(avals.dtype)
                )
                worst = max(worst, cmp.ratio)
                if not cmp.passed and cmp.ratio > worst_failing[0]:
                    worst_failing = (cmp.ratio, f"{run.label}, hidden input {k + 1}")
                if not cmp.passed and failure is None:
                    rel = cmp.max_abs_diff / cmp.max_abs_expected if cmp.max_abs_expected else float("inf")
                    which = f"output {i} " if len(got) > 1 else "the output "
                    failure = (
                        f"{run.label}, hidden input {k + 1} of {len(run.outputs)}: {which}differs from "
                        f"the expected value by up to {cmp.max_abs_diff:.4g} "
                        f"({rel:.2%} of its largest magnitude), {cmp.ratio:.3g} times the tolerance, "
                        f"which allows for float32 rounding in any summation order"
                    )
                    first_ratio = cmp.ratio
        per_case[run.expected.name] = {"worst_error_to_tolerance": worst}
    if failure:
        if worst_failing[0] > 2 * first_ratio:  # the first mismatch understates it: say how far it goes
            failure += f" (and {worst_failing[0]:.3g} times it in {worst_failing[1]})"
        failure += ". Check the formula against the statement."
        return CheckResult(name="value", passed=False, message=failure, details=per_case, verdict=Verdict.WRONG_ANSWER)
    n = sum(len(r.outputs) for r in runs)
    return CheckResult(
        name="value",
        passed=True,
        message=f"outputs match the reference on {n} hidden inputs across {len(runs)} cases",
        details=per_case,
    )


class ValueCheck:
    """The value check in the registry (`graders.checks.check.Check`): `check_values`."""

    name = "value"
    part: ScorePart = "value"
    headline = "Your function returns a wrong value"

    def run(self, runs: list[CaseRun], context: CheckContext) -> CheckResult:
        return check_values(runs, spec=context.spec)

    def explain(self, evidence: Evidence) -> Advice:
        return Advice(evidence.message)
