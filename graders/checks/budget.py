"""A budget problem's two judgements (docs/ARCHITECTURE.md, "Budget problems"): the residuals kept
on the device must fit the case's budget (else WRONG_POLICY, with by how much), and the policy part
of the score is how close the backward pass's recomputation comes to the least any policy within
the budget needs (`graders.reference.budget_facts`).

The score. With F the forward pass's FLOPs (the reference's, checkpoints removed: work every policy
does once), R* the optimum's recomputation and R yours (the judge's recompute figure, less the
margins the recompute bound allows for how a derivative and a forward pass are written), the
policy part earns (F + R*) / (F + R), capped at 1: the share of the best policy's speed yours
reaches, counting forward work and recomputation, the two things a policy changes. Recomputing
the whole forward pass again where the optimum recomputes nothing earns 0.5; a ratio of
recomputations alone would give 0 to every policy when the optimum is 0, and nothing would tell
a good policy from a wasteful one.
"""

from __future__ import annotations

from graders.checks.check import Advice
from graders.checks.comparison import CaseRun, device_bytes, host_bytes, is_bookkeeping
from graders.verdict import ResidualFact

OVER_BUDGET = "over the budget of"  # in every over-budget message; the residuals check's advice reads it


def budgeted_bytes(residuals: list[ResidualFact]) -> int:
    """What a budget of residuals counts: every residual byte the policy keeps for the backward
    pass, on the device or offloaded to host memory (`device_bytes` + `host_bytes`), loop counters
    and branch indices left out (`is_bookkeeping`: no policy).

    Offloaded bytes count because this judge prices recomputation and nothing else: a transfer to
    host memory and back would be free, so "offload everything" would fit any budget and recompute
    nothing (measured: budget_attention_tight's block with every activation offloaded kept 229,376
    bytes on the device and recomputed 114,818 FLOPs, where the least any policy keeping its
    values needs is 9,535,488), and the optimum would be the trivial policy."""
    kept = [r for r in residuals if not is_bookkeeping(r)]
    return device_bytes(kept) + host_bytes(kept)


def over_budget(run: CaseRun) -> str:
    """Why a case does not fit its budget, or "" when it does. A budget of residuals counts the
    bytes kept for the backward pass, offloaded ones too (`budgeted_bytes`; not loop counters); a
    budget of the peak (`budget_of = "peak"`) counts the backward pass's static peak live bytes,
    its ops in program order (`ModuleInfo.peak_live_bytes`)."""
    facts = run.expected.budget
    budget = facts.get("budget_bytes")
    if budget is None:
        return ""
    if facts.get("budget_of") == "peak":
        peak = run.bwd_peak_bytes
        if peak <= budget:
            return ""
        offloaded = host_bytes(run.residuals)
        host = (
            f"; the {offloaded:,} bytes you offload to host memory count here too (the backward program "
            "reads every residual as an argument, live from its start)"
            if offloaded
            else ""
        )
        return (
            f"holds up to {peak:,} bytes live at once in its backward pass (counted statically, its ops in "
            f"program order), {peak - budget:,} {OVER_BUDGET} {budget:,}: nest checkpoints so each part "
            f"is rebuilt just before its own backward pass, or keep fewer values{host}"
        )
    kept = budgeted_bytes(run.residuals)
    if kept <= budget:
        return ""
    offloaded = host_bytes([r for r in run.residuals if not is_bookkeeping(r)])
    host = (
        f" ({offloaded:,} of them offloaded to host memory, which count too: the judge prices recomputation, "
        "not transfers, so offloading does not make room)"
        if offloaded
        else ""
    )
    return (
        f"keeps {kept:,} bytes of residuals{host}, {kept - budget:,} {OVER_BUDGET} {budget:,}: "
        "save fewer values (recompute more of them) to fit"
    )


def budget_advice(message: str) -> Advice:
    """The panel's words for a submission over its budget (`message`: the residuals check's)."""
    return Advice(
        message.split("\n", 1)[0],
        headline="Your program does not fit the memory budget",
        advice="Any policy within the budget is accepted: keep fewer values, or nest checkpoints so the "
        "backward pass rebuilds one part at a time.",
    )


def policy_fraction(run: CaseRun, margin: int) -> tuple[float, str] | None:
    """(the policy part's share, the sentence that says why) for one case, or None when its
    figures are missing (a case without an optimum, or a backward pass whose FLOPs are unknown).
    `margin`: the FLOPs of recomputation the recompute bound forgives for how the submission is
    written (`graders.checks.recompute`: two elementwise passes and its formulation allowance)."""
    facts = run.expected.budget
    optimum = facts.get("optimum") or {}
    if run.bwd_recompute is None or optimum.get("flops") is None:
        return None
    forward = int(facts.get("forward_flops") or 0)
    best = int(optimum["flops"])
    yours = max(0, run.bwd_recompute.flops - margin)
    fraction = 1.0 if yours <= best else (forward + best) / (forward + yours)
    if optimum.get("measured"):
        least = f"the least the judge measured within the budget, of the reference and {optimum['measured']} schedules"
        budget = f"a backward peak of {facts['budget_bytes']:,} bytes"
    else:
        least = "the least" if optimum.get("optimal") else "the least found (the solver stopped early)"
        least += " any policy within the budget needs"
        budget = f"{facts['budget_bytes']:,} bytes"
    less = f" less {min(margin, run.bwd_recompute.flops):,} allowed for how it is written" if margin else ""
    why = (
        f"{run.label}: your backward pass recomputes {run.bwd_recompute.flops:,} FLOPs; {least} "
        f"({budget}) is {best:,}. Policy score {fraction:.3f} = "
        f"(forward {forward:,} + least {best:,}) / (forward + yours{less})"
    )
    why += proven_bound(optimum)
    if run.bwd_recompute.flops < best:
        why += beyond_optimum(best - run.bwd_recompute.flops, measured=bool(optimum.get("measured")))
    return fraction, why


def proven_bound(optimum: dict[str, object]) -> str:
    """On a budget of the peak, what is proven about the best measured schedule (`optimum`, from
    `graders.reference.budget_facts.peak_bound`): that it is the least, or the least any schedule
    of the reference's program needs; "" on a budget of residuals (its optimum is solved)."""
    bound = optimum.get("bound_flops")
    if not optimum.get("measured") or not isinstance(bound, int):
        return ""
    if optimum.get("optimal"):
        return ". No schedule of the reference's program within the budget recomputes less (proven)"
    return (
        f". No schedule of the reference's program within the budget recomputes less than {bound:,} FLOPs (proven: "
        "its residuals are all live when the backward pass starts, so they fit in the budget less the cotangents)"
    )


BEYOND = "beyond the optimum"  # in the panel's sentence; boards say it too (`server.store.boards`)


def beyond_optimum(saved_flops: int, *, measured: bool) -> str:
    """The sentence for a submission that recomputes `saved_flops` FLOPs less than the optimum: the
    optimum is over the schedules of the reference's program (which of its values to keep, which
    to rebuild; on a budget of the peak, the best schedule the judge measured), so a program
    below it computes the same function another way. The grade stays capped at 1."""
    over = (
        "the best schedule of the reference's program the judge measured"
        if measured
        else "the optimum of any schedule of the reference's program"
    )
    return (
        f". That is {saved_flops:,} FLOPs below {over}: {BEYOND}. The optimum chooses which values of the "
        "reference's forward program to keep and which to rebuild; yours computes the same function with "
        "less (an algebraic rewrite, a cheaper hand-written derivative, or chunking that program does not "
        "contain). The grade is capped at 1; the board ranks by what you recompute"
    )
