"""The recompute check: what the backward pass computes again, against the policy the problem asks
for (backward FLOPs of what runs, `graders.untrusted.flops`)."""

from __future__ import annotations

from typing import Any

from graders.checks.budget import over_budget, policy_fraction
from graders.checks.check import Advice, CheckContext, Evidence, ScorePart
from graders.checks.comparison import CaseRun
from graders.problems.memory_rule import MemoryRule
from graders.verdict import CheckResult, Verdict

WRITING_PASSES = 2  # elementwise passes over the largest backward value a correct rewrite may add
# share of the reference's backward FLOPs a correct rewrite may move into work on the residuals alone
# (measured: at most 0.5% in the bank's right/ files and held-out styles, past the passes)
RESIDUAL_SHARE = 0.05


JUDGED_FLOPS_FLOOR = 1_000_000  # a reference backward pass this costly is judged on any case


def judged_recompute_cases(runs: list[CaseRun]) -> set[str]:
    """The cases whose backward FLOPs the recompute bound judges: the one where the reference's
    backward pass spends the most FLOPs (ties all), and every case where it spends at least
    `JUDGED_FLOPS_FLOOR`.

    A relative bound means something only where the policy's work dwarfs what the way a derivative
    is written adds: a blocked mat-vec, an extra elementwise pass, a reordered product. On the
    bank's smallest cases those add 20-70% to a backward pass of a few hundred FLOPs (measured:
    736 against 442 FLOPs at d=4 in checkpoint_each_layer) while recomputing everything costs 2 to
    180 times the reference's on the largest one; past a million FLOPs no correct file of the bank
    or of the held-out styles spends more than 1.24 times the reference's (`bench/recompute_styles.py`
    prints the table). The other cases are reported.
    """
    counted = [r for r in runs if r.bwd_flops is not None]
    if not counted:
        return set()
    most = max(r.expected.bwd_flops for r in counted)
    return {
        r.expected.name for r in counted if r.expected.bwd_flops == most or r.expected.bwd_flops >= JUDGED_FLOPS_FLOOR
    }


def formulation_allowance(run: CaseRun) -> int:
    """FLOPs a judged case may recompute beyond the bound for how its forward pass is written: the
    recomputation of operations the required policy never recomputes (by op signature), up to the
    forward work the submission's forward program does beyond the reference's; 0 when a figure is
    unknown.

    A policy decides which forward values are saved; the work of rebuilding the others is that of
    the submission's own forward pass. An FSDP layer whose all-gather is a ring of `ppermute` steps
    placing blocks with one-hot arithmetic follows the policy exactly (the same residuals, piece by
    piece) and redoes that arithmetic in the backward pass, where the reference's `all_gather`
    costs no FLOPs: 2,246,488 against 1,564,928 FLOPs recomputed in fsdp_regather, its forward
    681,560 FLOPs dearer. A custom VJP that saves the policy's values and recomputes them anyway
    gets nothing from this: its forward pass costs what the reference's does, so it recomputes
    operations the policy saves with no forward work to show for them. The submission's forward
    FLOPs are its cheapest branch's (`ModuleInfo.flops_low`).
    """
    exp = run.expected
    figures = run.bwd_recompute
    if figures is None or run.fwd_flops_low is None or exp.fwd_flops is None:
        return 0
    beyond_forward = run.fwd_flops_low - exp.fwd_flops
    own = sum(flops for sig, flops in figures.by_signature.items() if sig not in exp.bwd_recomputed)
    return max(0, min(beyond_forward, own))


def forgiven(run: CaseRun) -> int:
    """FLOPs of recomputation forgiven for how a submission is written: `WRITING_PASSES`
    elementwise passes over the largest value of the reference's backward program, and its
    `formulation_allowance`."""
    return WRITING_PASSES * run.expected.bwd_largest_value_elements + formulation_allowance(run)


def _excess_named(run: CaseRun) -> str:
    """The recomputed operations the submission does more of than the reference, costliest first
    (at most three): "`dot_general(...) -> f32[32,256]` (268,435,456 FLOPs, which the policy
    saves)"; "" when none is named."""
    figures = run.bwd_recompute
    if figures is None:
        return ""
    theirs = run.expected.bwd_recomputed
    extra = sorted(
        (
            (flops - theirs.get(sig, 0), sig)
            for sig, flops in figures.by_signature.items()
            if flops > theirs.get(sig, 0)
        ),
        reverse=True,
    )[:3]
    parts = []
    required, policy = ("the reference",) * 2 if run.expected.budget else ("the required policy", "the policy")
    for flops, sig in extra:  # an open problem has no required policy: its comparison is the reference
        why = f"which {required} does not recompute" if sig not in theirs else f"more often than {policy} does"
        parts.append(f"`{figures.named.get(sig, 'an operation')}` ({flops:,} FLOPs, {why})")
    return "; ".join(parts)


def _recompute_failure(run: CaseRun, rule: MemoryRule, figures: tuple[int, int | None], *, at_least: bool) -> str:
    """Why one judged case recomputes too much, or "" (the bounds of `check_recompute`). `figures`
    are the submission's (forward work redone, work on the residuals alone), exact or, with
    `at_least`, lower bounds (the cheapest branch where only the run picks one)."""
    exp = run.expected
    recompute, residual = figures
    slack = rule.recompute_slack or 0.0
    margin = forgiven(run)
    some = "at least " if at_least else ""
    if exp.bwd_recompute_flops is not None:
        allowed = exp.bwd_recompute_flops * (1 + slack) + margin
        if recompute > allowed:
            named = _excess_named(run)
            return (
                f"{run.label}: your backward pass recomputes {some}{recompute:,} FLOPs of forward work "
                f"where the required policy recomputes {exp.bwd_recompute_flops:,} (at most {allowed:,.0f} "
                f"allowed)." + (f" It recomputes {named}." if named else "") + " Save the values the policy "
                "saves and use them in the backward pass instead of computing them again."
            )
    share = RESIDUAL_SHARE * exp.bwd_flops
    if exp.bwd_residual_flops is not None and residual is not None:
        allowed = exp.bwd_residual_flops * (1 + slack) + margin + share
        if residual > allowed:
            return (
                f"{run.label}: your backward pass spends {some}{residual:,} FLOPs on work that does not "
                f"depend on the cotangent (computing forward values again from what was saved) where the "
                f"required policy spends {exp.bwd_residual_flops:,} (at most {allowed:,.0f} allowed). "
                f"Use the values the policy saves instead of recomputing them."
            )
    return ""


def _case_details(run: CaseRun, *, exact: bool, judged: bool) -> dict[str, Any]:
    """The numbers of one case behind the check (FLOPs of both backward passes, the forward work
    each redoes, their residual-only parts, the costliest operations recomputed beyond the
    reference's), as stored in the verdict."""
    exp = run.expected
    assert run.bwd_flops is not None
    figures = run.bwd_recompute
    return {
        "expected_bwd_flops": exp.bwd_flops,
        "submitted_bwd_flops": run.bwd_flops,
        "expected_recompute_flops": exp.bwd_recompute_flops,
        "submitted_recompute_flops": figures.flops if figures is not None else None,
        "expected_residual_flops": exp.bwd_residual_flops,
        "submitted_residual_flops": run.bwd_residual_flops,
        "recomputed_beyond_policy": _excess_named(run),
        "formulation_allowance": formulation_allowance(run),
        "exact": exact,
        "judged": judged,
    }


def _judged_case_failure(run: CaseRun, rule: MemoryRule) -> str | None:
    """Why a judged case recomputes too much, from its exact figures or, where only the run picks a
    branch, from their lower bounds (the cheapest branch is still too much); None if it does not."""
    figures = run.bwd_recompute
    if figures is None:
        return None
    if run.bwd_flops_exact:
        high = (figures.flops, run.bwd_residual_flops)
        return _recompute_failure(run, rule, high, at_least=False) or None
    low = (figures.flops_low, run.bwd_residual_flops_low)
    return _recompute_failure(run, rule, low, at_least=True) or None


def _passed(rule: MemoryRule, judged_cases: set[str], details: dict[str, Any]) -> str:
    """The message of a judged recompute check that passed, naming the formulation allowance used."""
    own = sum(details[name]["formulation_allowance"] for name in judged_cases if name in details)
    message = (
        f"the backward pass recomputes no more than the required policy (+{rule.recompute_slack or 0:.0%} allowed) "
        f"on {', '.join(sorted(judged_cases))} (the case with the costliest backward pass and any past "
        f"{JUDGED_FLOPS_FLOOR:,} FLOPs; the others are reported)"
    )
    if own:
        message += (
            f"; up to {own:,} FLOPs more were allowed for redoing forward work of your own writing, "
            "which the reference's forward pass does not do"
        )
    return message


def _budget_policy(runs: list[CaseRun], judged_cases: set[str], details: dict[str, Any]) -> CheckResult:
    """A budget problem's policy score (`graders.checks.budget.policy_fraction`): the smallest
    share over the judged cases, never a failure (fitting the budget is the residuals check's)."""
    scored = []
    over = [run for run in runs if over_budget(run)]
    if over:  # recomputing little is no credit when it is bought with memory the budget does not give
        return CheckResult(
            name="recompute",
            passed=True,
            judged=False,
            details=details,
            message="not scored: over the budget in case "
            + ", ".join(repr(run.expected.name) for run in over)
            + " (the residuals check says by how much)",
        )
    for run in runs:
        if run.expected.name in judged_cases and run.bwd_flops_exact and run.expected.bwd_flops_exact:
            found = policy_fraction(run, forgiven(run))
            if found is not None:
                scored.append(found)
    if not scored:
        return CheckResult(
            name="recompute", passed=True, judged=False, details=details, message="not scored: no exact figures"
        )
    fraction, why = min(scored)
    return CheckResult(name="recompute", passed=True, details=details, message=why, fraction=round(fraction, 4))


def check_recompute(runs: list[CaseRun], *, rule: MemoryRule) -> CheckResult:
    """What the backward pass recomputes, against the policy the problem asks for.

    Under `exact` with a `recompute_slack`, a backward pass that spends more than (1 + slack) times
    the reference's backward FLOPs, plus `WRITING_PASSES` elementwise passes over the largest value
    of the reference's backward program (how a derivative is written moves the count by a pass or
    two) plus its `formulation_allowance` (forward work of its own writing redone), or whose work on
    the residuals alone (`CaseRun.bwd_residual_flops`: what depends on no cotangent, the forward
    values it computes again) exceeds (1 + slack) times the reference's plus those margins plus
    `RESIDUAL_SHARE` of the reference's whole backward pass (a custom_vjp that saves a dense layer's
    matmul outputs and recomputes them anyway adds 25% to the whole but 1000 times to that part),
    fails with WRONG_POLICY on the case the bound judges (`judged_recompute_cases`: the one with the
    costliest reference backward pass), saying how much forward work it redoes: a policy saves
    values so they need not be recomputed, and a solution that saves the right values and recomputes
    everything anyway (measured: 180 times the reference's recomputation in checkpoint_stages) does
    not follow it. The FLOPs are those of what runs (`graders.untrusted.flops`: no dead code, no
    untaken branch of a constant `cond`). Not judged (reported only) under `at_most` (saving less
    and recomputing more is allowed there), without a slack, or when a figure of a judged case is
    inexact (a loop's trip count or a branch index that only the run decides), unless even its lower
    bound (the cheapest branch, each unknown loop once) is over: a data-dependent `lax.cond` around
    a recompute-everything branch is no way out.
    """
    judged = rule.rule == "exact" and rule.recompute_slack is not None
    judged_cases = judged_recompute_cases(runs)
    details: dict[str, Any] = {}
    failure = None
    inexact = False
    for run in runs:
        exp = run.expected
        if run.bwd_flops is None:
            continue
        exact = run.bwd_flops_exact and exp.bwd_flops_exact
        decides = exp.name in judged_cases
        inexact = inexact or (decides and not exact)
        details[exp.name] = _case_details(run, exact=exact, judged=judged and decides)
        if judged and decides and exp.bwd_flops_exact and failure is None:
            failure = _judged_case_failure(run, rule)
    if rule.rule == "budget":
        return _budget_policy(runs, judged_cases, details)
    if failure:
        return CheckResult(
            name="recompute", passed=False, message=failure, details=details, verdict=Verdict.WRONG_POLICY
        )
    note = " (a loop's trip count or a branch is decided only at run time: the FLOPs are not exact)" if inexact else ""
    if not judged or inexact:
        return CheckResult(
            name="recompute",
            passed=True,
            judged=False,
            details=details,
            message=("reported only" if not judged else "not judged") + note,
        )
    return CheckResult(name="recompute", passed=True, details=details, message=_passed(rule, judged_cases, details))


class RecomputeCheck:
    """The recompute check in the registry (`graders.checks.check.Check`): `check_recompute`."""

    name = "recompute"
    part: ScorePart = "policy"
    headline = "Your backward pass recomputes more than the policy asks"

    def run(self, runs: list[CaseRun], context: CheckContext) -> CheckResult:
        return check_recompute(runs, rule=context.spec.memory)

    def explain(self, evidence: Evidence) -> Advice:
        return Advice(
            evidence.message, "Use the values your policy saves in the backward pass instead of recomputing them."
        )
