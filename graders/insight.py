"""Policy fingerprints: which checkpoint policy a graded submission made, in a form that two
submissions making the same mistake in different code share (docs/ARCHITECTURE.md, "Insight").

A fingerprint is read from the verdict report alone (so old verdicts can be fingerprinted from
their stored JSON), from the residual report of the case it shows, the largest one where the
submission's residuals differ from the reference's (`graders.verifier.verify.residual_report`):

- the verdict;
- the reference's residuals the submission does not save, each as its aval and the op that
  produces it (`f32[16,32] from dot_general`);
- the values it saves that the reference does not, each as aval, producing op and memory kind;
- the memory kinds it keeps residuals in;
- how much its backward pass recomputes next to the reference's (`RECOMPUTE_BUCKETS`), as the
  verdict's recompute check judged it, when the FLOPs are exact.

Lists are sorted: the order in which a program happens to return its residuals does not matter.
Names do not appear anywhere (an aval, an op name and a memory kind say nothing of the student's
identifiers), so renaming, reformatting or a decorator instead of a call give the same
fingerprint, and a correct solution's is the reference's own (nothing missed, nothing extra). A
report without residuals (the program did not run, or its values were wrong before residuals
were compared) is fingerprinted by its verdict and the first check it failed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from graders.verdict import ResidualFact, ResidualReport

RECOMPUTE_BUCKETS = ("less", "same", "more", "much more", "some", "none", "unknown")
SAME_RECOMPUTE_SLACK = 1.25  # as `check_recompute`'s default slack: within it, "the same"
MUCH_MORE_RECOMPUTE = 2.0


@dataclass(frozen=True)
class PolicyFingerprint:
    """A policy's fingerprint.

    Attributes:
        key: 16 hex digits of the SHA-256 of `parts` (what is stored and grouped by).
        parts: the canonical facts (see the module docstring), JSON-ready.
        summary: one sentence for teachers, in the words of the verdict panel.
    """

    key: str
    parts: dict[str, Any]
    summary: str


def _fact(fact: ResidualFact) -> str:
    return fact.described()


def _difference(
    expected: list[ResidualFact], submitted: list[ResidualFact]
) -> tuple[list[ResidualFact], list[ResidualFact]]:
    """(reference residuals not saved, saved values the reference does not save): by the value
    match when the verifier made one (`matched`), else by aval and memory kind as multisets."""
    if any(f.matched is not None for f in expected + submitted):
        return [f for f in expected if f.matched is False], [f for f in submitted if f.matched is False]
    wanted = Counter((tuple(f.shape), f.dtype, f.memory_kind) for f in expected)
    got = Counter((tuple(f.shape), f.dtype, f.memory_kind) for f in submitted)
    missed_keys, extra_keys = wanted - got, got - wanted
    missed, extra = [], []
    for fact in expected:
        k = (tuple(fact.shape), fact.dtype, fact.memory_kind)
        if missed_keys[k] > 0:
            missed_keys[k] -= 1
            missed.append(fact)
    for fact in submitted:
        k = (tuple(fact.shape), fact.dtype, fact.memory_kind)
        if extra_keys[k] > 0:
            extra_keys[k] -= 1
            extra.append(fact)
    return missed, extra


def recompute_bucket(residuals: ResidualReport, check: dict[str, Any] | None = None) -> str:
    """How much the submission's backward pass recomputes next to the reference's, as the
    verdict's own `recompute` check judged it when it did: "same" when it passed (within its
    slack: a correct solution written another way may recompute a little more), else by the FLOP
    ratio: "more" (up to 2x), "much more", "some" (the reference recomputes nothing); without a
    judging check, by the ratio alone ("less", "same" within 1.25x, ...); "unknown" when FLOPs
    are not exact or not measured."""
    expected, submitted = residuals.expected_recompute_flops, residuals.submitted_recompute_flops
    if not residuals.flops_exact or expected is None or submitted is None:
        return "unknown"
    if check is not None and check.get("judged", True) and check.get("passed"):
        return "same"
    if expected <= 0:
        return "none" if submitted <= 0 else "some"
    ratio = submitted / expected
    if ratio < 1 / SAME_RECOMPUTE_SLACK:
        return "less"
    if ratio <= SAME_RECOMPUTE_SLACK:
        return "same"
    return "more" if ratio <= MUCH_MORE_RECOMPUTE else "much more"


def _listed(facts: list[str]) -> str:
    counted = Counter(facts)
    items = [f"{n} x {fact}" if n > 1 else fact for fact, n in sorted(counted.items())]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def fingerprint(report: dict[str, Any]) -> PolicyFingerprint | None:
    """The fingerprint of a verdict report (its stored JSON, as a dict); None for a report
    without a verdict (still queued or running).

    Raises:
        pydantic.ValidationError: a residual report that is not one.
    """
    verdict = report.get("verdict")
    if not verdict:
        return None
    raw = report.get("residuals")
    if not raw:
        failed = next((c.get("name") for c in report.get("checks") or [] if not c.get("passed", True)), None)
        parts: dict[str, Any] = {"verdict": verdict, "failed": failed}
        summary = (
            f"{verdict}: stops at the {failed} check, before residuals are compared"
            if failed
            else f"{verdict} without a residual report"
        )
    else:
        residuals = ResidualReport.model_validate(raw)
        missed, extra = _difference(residuals.expected, residuals.submitted)
        bucket = recompute_bucket(
            residuals, next((c for c in report.get("checks") or [] if c.get("name") == "recompute"), None)
        )
        by_value = any(f.matched is not None for f in residuals.expected + residuals.submitted)
        parts = {
            "verdict": verdict,
            "missed": sorted(_fact(f) for f in missed),
            "extra": sorted(_fact(f) for f in extra),
            "kinds": sorted({f.memory_kind for f in residuals.submitted}),
            "recompute": bucket,
            "compared": "values" if by_value else "avals",
        }
        summary = _summary(parts)
    key = hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    return PolicyFingerprint(key=key, parts=parts, summary=summary)


WRONG_BEFORE_POLICY = {"WRONG_ANSWER": "wrong values", "WRONG_GRADIENT": "wrong gradients"}


def _summary(parts: dict[str, Any]) -> str:
    """One sentence: what was wrong before the policy (values, gradients), what the policy saves
    against the reference's, and what it recomputes. Residuals compared by shape only (values
    were wrong, so not compared) are said as such."""
    missed, extra, bucket = parts["missed"], parts["extra"], parts["recompute"]
    same = (
        "saves what the reference saves"
        if parts.get("compared") != "avals"
        else "saves residuals of the reference's shapes (values not compared)"
    )
    if missed and extra:
        said = f"saves {_listed(extra)} where the reference saves {_listed(missed)}"
    elif extra:
        said = f"{same}, and also {_listed(extra)}"
    elif missed:
        said = f"does not save {_listed(missed)}, which the reference saves (the backward pass recomputes it)"
    else:
        said = same
    lead = WRONG_BEFORE_POLICY.get(parts["verdict"])
    if lead:
        said = f"{lead}; {said}"
    recompute = {
        "more": "recomputes more than the reference (up to 2x its FLOPs)",
        "much more": "recomputes more than twice what the reference does",
        "some": "recomputes what the reference does not recompute at all",
        "less": "recomputes less than the reference",
    }.get(bucket)
    return f"{said}; {recompute}" if recompute else said
