"""The panel's first words: from the check that failed and the residual comparison, a headline,
one sentence naming what was saved wrongly (or recomputed), and advice (`diagnose`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graders.verdict import VERDICT_EXPLANATIONS, Verdict
from server.web.formatting import human_bytes

if TYPE_CHECKING:  # the panel's view models; the panel imports this module
    from server.web.panel import CheckView, ResidualRow


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


def _listed(rows: list[ResidualRow], limit: int = 3) -> str:
    def named(r: ResidualRow) -> str:
        either = r.expected or r.yours
        return f"{r.aval} ({either.source})" if either is not None and either.source else r.aval

    parts = [named(r) for r in rows[:limit]]
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return ", ".join(parts) + more


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"


def diagnose(
    verdict: Verdict, checks: list[CheckView], rows: list[ResidualRow], residuals: Mapping[str, Any] | None
) -> Diagnosis:
    """The one-line diagnosis of a verdict from its checks and residual rows (see `Diagnosis`)."""
    failed = next((c for c in checks if c.state == "fail"), None)
    if verdict == Verdict.ACCEPTED or failed is None:
        return Diagnosis(VERDICT_EXPLANATIONS[verdict], "", "")
    if failed.name == "residuals" and "keeps them in other memory" in failed.message:
        return Diagnosis(
            "Your checkpoint policy saves the right values in the wrong memory",
            failed.message.split("\n", 1)[0],
            "Keep each value where the required policy keeps it: offload to pinned_host what it "
            "offloads, and leave the rest in device memory.",
        )
    if failed.name == "residuals":
        missing = [r for r in rows if r.status == "reference"]
        extra = [r for r in rows if r.status == "yours"]
        parts = []
        if extra:
            parts.append(f"Your code saves {_values(len(extra))} the required policy does not keep: {_listed(extra)}.")
        if missing:
            parts.append(f"It does not save {_values(len(missing))} the required policy keeps: {_listed(missing)}.")
        if extra and missing:
            advice = (
                "Change what your policy saves: keep the missing values, and let the extra ones be "
                "recomputed in the backward pass."
            )
        elif extra:
            advice = (
                "Save less: those values should be recomputed in the backward pass (a stricter policy, "
                "or one checkpointed region around more of the computation)."
            )
        elif missing:
            advice = "Save more: let the policy keep those values instead of recomputing them."
        else:
            advice = ""
        return Diagnosis(
            "Your checkpoint policy saves different values than the required one",
            " ".join(parts) or failed.message,
            advice,
        )
    if failed.name == "peak_memory" and residuals:
        yours, limit = residuals.get("submitted_bwd_peak_bytes"), residuals.get("expected_bwd_peak_bytes")
        detail = failed.message
        if isinstance(yours, int) and isinstance(limit, int):
            detail = (
                f"Your backward pass holds up to {human_bytes(yours)} at once; the reference's peak is "
                f"{human_bytes(limit)}. " + failed.message
            )
        matched = "since you save the same values" in failed.message
        return Diagnosis(
            "Your backward pass needs more memory than allowed",
            detail,
            "Your saved values are right: write the backward computation with fewer large temporaries."
            if matched
            else "Save fewer residuals, or checkpoint in smaller pieces so less is live at once.",
        )
    if failed.name == "recompute":
        return Diagnosis(
            "Your backward pass recomputes more than the policy asks",
            failed.message,
            "Use the values your policy saves in the backward pass instead of recomputing them.",
        )
    names = {
        "value": "Your function returns a wrong value",
        "avals": "Your function returns the wrong shape or dtype",
        "gradient": "Your gradients are wrong",
        "finite_difference": "Your gradients are wrong",
        "sandbox": "Your code did not run to the end",
        "module": "Your file does not define what is asked",
    }
    return Diagnosis(names.get(failed.name, VERDICT_EXPLANATIONS[verdict]), failed.message, "")
