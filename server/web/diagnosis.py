"""The panel's first words: from the check that failed and the residual comparison, a headline,
one sentence naming what was saved wrongly (or recomputed), and advice (`diagnose`). What each check
says of its own failure is the check's (`graders.checks.registry`); this module gathers what the
panel knows for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graders.checks.registry import Evidence, explainer
from graders.verdict import VERDICT_EXPLANATIONS, Verdict
from server.web.views import CheckView, ResidualRow


@dataclass(frozen=True)
class Recompute:
    """The FLOPs each backward pass spends recomputing what was not saved."""

    yours: int
    reference: int


@dataclass(frozen=True)
class Diagnosis:
    """The panel's first lines: `headline` names what failed (the first failed check, not the
    verdict's general wording); `detail` says it about this submission in one or two sentences;
    `advice` what to change, or "" when there is nothing specific to say."""

    headline: str
    detail: str
    advice: str


def _described(row: ResidualRow) -> str:
    """`f32[64,256] (dot_general)`: a row's aval and what produced it, when known."""
    either = row.expected or row.yours
    return f"{row.aval} ({either.source})" if either is not None and either.source else row.aval


def evidence_of(failed: CheckView, rows: list[ResidualRow], residuals: Mapping[str, Any] | None) -> Evidence:
    """What the panel knows of a failed check: its message, the values saved by one side only
    (from the rows), and both backward peaks (from the residual report)."""
    yours = residuals.get("submitted_bwd_peak_bytes") if residuals else None
    limit = residuals.get("expected_bwd_peak_bytes") if residuals else None
    return Evidence(
        message=failed.message,
        extra=[_described(r) for r in rows if r.status == "yours"],
        missing=[_described(r) for r in rows if r.status == "reference"],
        yours_peak_bytes=yours if isinstance(yours, int) else None,
        limit_peak_bytes=limit if isinstance(limit, int) else None,
    )


def diagnose(
    verdict: Verdict, checks: list[CheckView], rows: list[ResidualRow], residuals: Mapping[str, Any] | None
) -> Diagnosis:
    """The diagnosis of a verdict (see `Diagnosis`): the first failed check's headline and what it
    says of itself (`Check.explain`); the verdict's general words for a check no registry knows."""
    failed = next((c for c in checks if c.state == "fail"), None)
    if verdict == Verdict.ACCEPTED and residuals and residuals.get("budget_bytes") is not None:
        fits = "your backward pass's peak fits" if residuals.get("budget_of") == "peak" else "your residuals fit"
        return Diagnosis(f"Values and gradients are right, and {fits} the memory budget", "", "")
    if verdict == Verdict.ACCEPTED or failed is None:
        return Diagnosis(VERDICT_EXPLANATIONS[verdict], "", "")
    check = explainer(failed.name)
    if check is None:
        return Diagnosis(VERDICT_EXPLANATIONS[verdict], failed.message, "")
    said = check.explain(evidence_of(failed, rows, residuals))
    return Diagnosis(said.headline or check.headline, said.detail, said.advice)
