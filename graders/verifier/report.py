"""The residual comparison shown beside a verdict (`ResidualReport`): the saved residuals of both
sides, their bytes, peaks and backward FLOPs, for the case that shows a mistake best."""

from __future__ import annotations

from typing import Any

from graders.checks.comparison import CaseRun, is_bookkeeping
from graders.checks.residuals import size_signature
from graders.verdict import ResidualFact, ResidualReport
from graders.verifier.xla_memory import held_bytes, parted, residual_bytes


def residual_report(runs: list[CaseRun]) -> ResidualReport | None:
    """The report shown beside the verdict: the case whose residuals differ from the reference's
    with the most bytes at stake (so the numbers show what the mistake costs), else the case with
    the most residual bytes."""
    if not runs:
        return None

    def differs(run: CaseRun) -> bool:
        # bookkeeping (loop counters, branch indices) is left out, as in the residuals check
        mine = [f for f in run.residuals if not is_bookkeeping(f)]
        theirs = [f for f in run.expected.residuals if not is_bookkeeping(f)]
        return size_signature(mine) != size_signature(theirs) or any(f.matched is False for f in mine)

    differing = [r for r in runs if differs(r)]
    chosen = max(differing or runs, key=lambda r: max(r.expected.residual_bytes, sum(x.nbytes for x in r.residuals)))
    exp = chosen.expected
    communicated = chosen.bwd_communication
    expected = [fact.model_copy() for fact in exp.residuals]
    if chosen.expected_matched is not None:
        for fact, saved in zip(expected, chosen.expected_matched, strict=True):
            fact.matched = saved
    return ResidualReport(
        case=exp.name,
        expected=expected,
        submitted=chosen.residuals,
        expected_bytes=_bytes(exp.residuals),
        submitted_bytes=_bytes(chosen.residuals),
        expected_host_bytes=_bytes([r for r in exp.residuals if not r.on_device]),
        submitted_host_bytes=_bytes([r for r in chosen.residuals if not r.on_device]),
        expected_bwd_peak_bytes=exp.bwd_peak_bytes,
        submitted_bwd_peak_bytes=chosen.bwd_peak_bytes,
        expected_fwd_peak_bytes=exp.fwd_peak_bytes,
        submitted_fwd_peak_bytes=chosen.fwd_peak_bytes,
        no_checkpoint_bytes=exp.plain_residual_bytes,
        no_checkpoint_bwd_peak_bytes=exp.plain_bwd_peak_bytes,
        expected_bwd_flops=exp.bwd_flops,
        submitted_bwd_flops=chosen.bwd_flops,
        no_checkpoint_bwd_flops=exp.plain_bwd_flops,
        expected_recompute_flops=exp.bwd_recompute_flops,
        flops_exact=exp.bwd_flops_exact and chosen.bwd_flops_exact,
        submitted_recompute_flops=chosen.bwd_recompute.flops if chosen.bwd_recompute else None,
        full_remat_bytes=exp.full_remat_bytes,
        full_remat_bwd_flops=exp.full_remat_bwd_flops,
        full_remat_recompute_flops=exp.full_remat_recompute_flops,
        full_remat_bwd_peak_bytes=exp.full_remat_bwd_peak_bytes,
        expected_bwd_collectives=exp.bwd_collectives,
        submitted_bwd_collectives=communicated.counts if communicated else {},
        expected_bwd_received_bytes=exp.bwd_received_bytes,
        submitted_bwd_received_bytes=communicated.received_bytes if communicated else None,
        no_checkpoint_bwd_received_bytes=exp.plain_bwd_received_bytes,
        full_remat_bwd_received_bytes=exp.full_remat_bwd_received_bytes,
        no_checkpoint_bwd_device_bytes=exp.plain_bwd_device_bytes,
        full_remat_bwd_device_bytes=exp.full_remat_bwd_device_bytes,
        **_budget_fields(exp.budget),
        expected_xla_memory=_xla(exp.xla_memory, _bytes(exp.residuals)),
        submitted_xla_memory=_xla(chosen.xla_memory, _bytes(chosen.residuals)),
    )


def _budget_fields(facts: dict[str, Any]) -> dict[str, Any]:
    """A budget problem's fields of the report (`graders.reference.budget_facts`); none otherwise."""
    return {
        "budget_bytes": facts.get("budget_bytes"),
        "optimum": dict(facts.get("optimum") or {}),
        "frontier": list(facts.get("frontier") or []),
        "budget_of": facts.get("budget_of") or ("residuals" if facts else None),
        "schedules": list(facts.get("schedules") or []),
    }


def _xla(memory: dict[str, Any], judge_bytes: int) -> dict[str, Any]:
    """XLA's figures of one side's compiled programs with its count of the residuals and why that
    parts from the judge's `judge_bytes` (`graders.verifier.xla_memory`); {} without them."""
    if not memory or not memory.get("fwd"):
        return {}
    counted = residual_bytes(memory["fwd"], memory.get("primal_output_bytes", 0))
    return {
        "fwd": memory["fwd"],
        "bwd": memory.get("bwd", {}),
        "residual_bytes": counted,
        "bwd_device_bytes": held_bytes(memory.get("bwd") or {}),
        "parted": parted(judge_bytes, counted, memory["fwd"], memory.get("outputs", 0)),
    }


def _bytes(facts: list[ResidualFact]) -> int:
    """Residual bytes: what one device keeps on a mesh (`ResidualFact.device_bytes`), else all."""
    return sum(f.nbytes if f.device_bytes is None else f.device_bytes for f in facts)
