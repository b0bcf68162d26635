"""The peak memory check: the backward pass's peak live bytes against the reference's."""

from __future__ import annotations

from graders.checks.check import Advice, CheckContext, Evidence, ScorePart
from graders.checks.comparison import CaseRun, human_bytes
from graders.problems.memory_rule import MemoryRule
from graders.verdict import CheckResult, Verdict
from graders.verifier.xla_memory import held_bytes

SAME_VALUES = "since you save the same values"  # the calibrated slack's reason, read back by `explain`


def _same_values(run: CaseRun) -> bool:
    """Whether the submission saves exactly the reference's residuals, as values (every one of
    either side matched one to one by the residuals check)."""
    return (
        run.expected_matched is not None
        and all(run.expected_matched)
        and all(f.matched for f in run.residuals)
        and len(run.residuals) == len(run.expected.residuals)
    )


def peak_slack(run: CaseRun, rule: MemoryRule) -> tuple[int, str]:
    """(bytes, why) a submission's backward peak may exceed the reference's by.

    `rule.slack_bytes`; and when the submission saves exactly the reference's values, at least twice
    the largest single value of the reference's backward program: the policy is then the
    reference's, and how the derivative is written moves the peak by a temporary or two, not by a
    policy's worth (measured: `exp2(c * log2 e)` for `exp(c)` in checkpoint_stages holds one f32[N]
    and three scalars more, 4,194,316 bytes in the large case).
    """
    calibrated = 2 * run.expected.bwd_largest_value_bytes
    if _same_values(run) and calibrated > rule.slack_bytes:
        return calibrated, f"two of the largest values of its backward pass, {SAME_VALUES}"
    return rule.slack_bytes, "allowed"


def _summary(run: CaseRun) -> str:
    """The reported figures of the last case: the static peaks, or on a mesh what one device holds
    while each backward program runs by XLA's count (`graders.verifier.xla_memory.held_bytes`:
    the static count adds up a partitioned program's global arrays, so it is no device's)."""
    mine = held_bytes((run.xla_memory or {}).get("bwd") or {})
    theirs = held_bytes((run.expected.xla_memory or {}).get("bwd") or {})
    if mine is not None and theirs is not None:
        return (
            f"; {run.label}: the backward pass holds {mine:,} bytes per device (XLA's count: arguments, "
            f"outputs, temporaries), the reference's {theirs:,}"
        )
    return (
        f"; {run.label}: backward pass peak {run.bwd_peak_bytes:,} bytes, reference "
        f"{run.expected.bwd_peak_bytes:,} bytes"
    )


def check_peak_memory(runs: list[CaseRun], *, rule: MemoryRule) -> CheckResult:
    """Compares the backward pass's peak live bytes with the reference's.

    Under `at_most` (and `exact` with `bound_bwd_peak`) a peak above the reference's plus the slack
    (`peak_slack`) fails with WRONG_POLICY: checkpointing a whole chain saves few residuals but
    holds every recomputed value at once in the backward pass, and only this check sees it.
    Otherwise the residual signature decides and this check only reports the numbers.
    """
    details = {}
    failure = None
    for run in runs:
        exp_peak, sub_peak = run.expected.bwd_peak_bytes, run.bwd_peak_bytes
        slack, why = peak_slack(run, rule)
        details[run.expected.name] = {
            "expected_bwd_peak_bytes": exp_peak,
            "submitted_bwd_peak_bytes": sub_peak,
            "expected_fwd_peak_bytes": run.expected.fwd_peak_bytes,
            "submitted_fwd_peak_bytes": run.fwd_peak_bytes,
            "slack_bytes": slack,
        }
        if rule.bounds_peak and sub_peak > exp_peak + slack and failure is None:
            failure = (
                f"{run.label}: your backward pass holds up to {sub_peak:,} bytes live at once (measured "
                f"statically, ops in program order), more than the reference's {exp_peak:,} bytes plus "
                f"{slack:,} ({why})."
            )
            if not _same_values(run):
                failure += (
                    " Saving few residuals is not enough if the backward pass then recomputes a whole "
                    "chain and keeps it all at once: checkpoint in smaller pieces."
                )
    if failure:
        return CheckResult(
            name="peak_memory", passed=False, message=failure, details=details, verdict=Verdict.WRONG_POLICY
        )
    summary = _summary(runs[-1]) if runs else ""
    if not rule.bounds_peak:
        why = {
            "exact": "this problem's rule is an exact residual signature",
            "budget": f"this problem's budget, of its {'peak' if rule.budget_of == 'peak' else 'residual bytes'}, "
            "is judged with the residuals",
        }.get(rule.rule, "")
        return CheckResult(
            name="peak_memory",
            passed=True,
            judged=False,
            message=f"reported only ({why})" + summary,
            details=details,
        )
    return CheckResult(
        name="peak_memory",
        passed=True,
        message="backward pass peak live bytes within the reference's on every case" + summary,
        details=details,
    )


class PeakMemoryCheck:
    """The peak memory check in the registry (`graders.checks.check.Check`): `check_peak_memory`."""

    name = "peak_memory"
    part: ScorePart = "policy"
    headline = "Your backward pass needs more memory than allowed"

    def run(self, runs: list[CaseRun], context: CheckContext) -> CheckResult:
        return check_peak_memory(runs, rule=context.spec.memory)

    def explain(self, evidence: Evidence) -> Advice:
        """Both peaks in readable units, and whether to save less or write the backward pass with
        fewer temporaries (when the saved values are already the reference's)."""
        detail = evidence.message
        if evidence.yours_peak_bytes is not None and evidence.limit_peak_bytes is not None:
            detail = (
                f"Your backward pass holds up to {human_bytes(evidence.yours_peak_bytes)} at once; the "
                f"reference's peak is {human_bytes(evidence.limit_peak_bytes)}. " + evidence.message
            )
        if SAME_VALUES in evidence.message:
            return Advice(
                detail, "Your saved values are right: write the backward computation with fewer large temporaries."
            )
        return Advice(detail, "Save fewer residuals, or checkpoint in smaller pieces so less is live at once.")
