"""Memory checks: which residuals autodiff saves, and the backward pass's peak live bytes."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

from graders.checks.common import CaseRun
from graders.problem import MemoryRule
from graders.verdict import CheckResult, ResidualAval, Verdict


def signature(residuals: list[ResidualAval]) -> Counter[tuple[tuple[int, ...], str]]:
    """The residual signature: the multiset of residual avals (order-free: two correct programs
    may save the same values in a different order)."""
    return Counter((tuple(r.shape), r.dtype) for r in residuals)


def describe_residuals(avals: Sequence[Any], notes: Sequence[Any] | None, *,
                       hide_source: bool = False) -> list[ResidualAval]:
    """The residuals read from an artifact, with `saved_residuals` notes where they agree.

    `saved_residuals` lists the same values as the VJP's leaves, but not always in the same order
    (measured with JAX 0.10.2: a relu's boolean mask comes before the intermediates it follows in
    the VJP). So notes are used only when their avals form the same multiset as the artifact's
    residual avals, and then the listing follows the notes' order. Otherwise the artifact's avals
    are listed without notes: the artifact decides, the notes only explain.

    Args:
        avals: residual avals read from the fwd artifact (objects with `.shape` and `.dtype`).
        notes: `{"shape", "dtype", "note"}` dicts or objects, or None.
        hide_source: drop "from <file>:<line> (<function>)" (for the reference: never show its
            path or structure to students).
    """
    from_artifact = [ResidualAval(shape=list(a.shape), dtype=str(a.dtype)) for a in avals]
    if not notes:
        return from_artifact

    def field(n: Any, name: str) -> Any:
        return n[name] if isinstance(n, dict) else getattr(n, name)

    described = [ResidualAval(shape=list(field(n, "shape")), dtype=str(field(n, "dtype")),
                              note=str(field(n, "note"))) for n in notes]
    if signature(described) != signature(from_artifact):
        return from_artifact
    if hide_source:
        for r in described:
            r.note = re.sub(r" from (?!the argument).*$", "", r.note or "")
    return described


def format_residuals(residuals: list[ResidualAval], *, title: str) -> str:
    """A `print_saved_residuals`-style listing with a count and total bytes."""
    total = sum(r.nbytes for r in residuals)
    lines = [f"{title}: {len(residuals)} residual{'s' if len(residuals) != 1 else ''}, {total:,} bytes"]
    width = max((len(r.short()) for r in residuals), default=0)
    for r in residuals:
        lines.append(f"  {r.short():<{width}}  {r.note or ''}".rstrip())
    return "\n".join(lines)


def _difference(expected: list[ResidualAval], submitted: list[ResidualAval]) -> str:
    want, got = signature(expected), signature(submitted)
    missing, extra = want - got, got - want
    short = lambda key: ResidualAval(shape=list(key[0]), dtype=key[1]).short()  # noqa: E731
    parts = []
    if missing:
        parts.append("not saved by yours: " + ", ".join(f"{short(k)} x{n}" for k, n in sorted(missing.items())))
    if extra:
        parts.append("saved by yours only: " + ", ".join(f"{short(k)} x{n}" for k, n in sorted(extra.items())))
    return "; ".join(parts)


def check_residuals(runs: list[CaseRun], *, rule: MemoryRule) -> CheckResult:
    """Compares saved residuals with the reference's under `rule`.

    `exact`: the residual signatures must be equal. `at_most`: the residual bytes must not exceed
    the reference's plus `rule.slack_bytes`.

    Returns:
        A "residuals" CheckResult; fails with WRONG_POLICY and both listings, for the failing case
        with the most bytes at stake (the case the residual report shows too).
    """
    details = {}
    failures: list[tuple[int, str]] = []  # (bytes at stake, message) per failing case
    for run in runs:
        expected, submitted = run.expected.residuals, run.residuals
        exp_bytes, sub_bytes = sum(r.nbytes for r in expected), sum(r.nbytes for r in submitted)
        details[run.expected.name] = {"expected_count": len(expected), "submitted_count": len(submitted),
                                      "expected_bytes": exp_bytes, "submitted_bytes": sub_bytes}
        if rule.rule == "exact":
            ok = signature(expected) == signature(submitted)
            why = "saves different residuals than the required checkpoint policy"
        else:
            ok = sub_bytes <= exp_bytes + rule.slack_bytes
            why = (f"saves {sub_bytes:,} bytes of residuals, more than the {exp_bytes + rule.slack_bytes:,} "
                   f"allowed")
        if not ok:
            diff = _difference(expected, submitted)
            failures.append((max(exp_bytes, sub_bytes), f"{run.label}: your function {why}"
                             + (f" ({diff})" if diff else "") + ".\n"
                             + format_residuals(expected, title="expected") + "\n"
                             + format_residuals(submitted, title="yours") + "\n"
                             + f"backward pass peak live bytes: yours {run.bwd_peak_bytes:,}, "
                               f"reference {run.expected.bwd_peak_bytes:,}"))
    # the case with the most bytes at stake, as in the residual report beside the verdict
    failure = max(failures, key=lambda f: f[0])[1] if failures else None
    if failure:
        return CheckResult(name="residuals", passed=False, message=failure, details=details,
                           verdict=Verdict.WRONG_POLICY)
    kind = "the same residuals as" if rule.rule == "exact" else "no more residual bytes than"
    return CheckResult(name="residuals", passed=True, message=f"saves {kind} the reference on every case",
                       details=details)


def check_peak_memory(runs: list[CaseRun], *, rule: MemoryRule) -> CheckResult:
    """Compares the backward pass's peak live bytes with the reference's.

    Under `at_most` (and `exact` with `bound_bwd_peak`) a peak above the reference's plus
    `rule.slack_bytes` fails with WRONG_POLICY: checkpointing a whole chain saves few residuals but
    holds every recomputed value at once in the backward pass, and only this check sees it.
    Otherwise the residual signature decides and this check only reports the numbers.
    """
    details = {}
    failure = None
    for run in runs:
        exp_peak, sub_peak = run.expected.bwd_peak_bytes, run.bwd_peak_bytes
        details[run.expected.name] = {"expected_bwd_peak_bytes": exp_peak, "submitted_bwd_peak_bytes": sub_peak,
                                      "expected_fwd_peak_bytes": run.expected.fwd_peak_bytes,
                                      "submitted_fwd_peak_bytes": run.fwd_peak_bytes}
        if rule.bounds_peak and sub_peak > exp_peak + rule.slack_bytes and failure is None:
            failure = (f"{run.label}: your backward pass holds up to {sub_peak:,} bytes live at once, more than "
                       f"the reference's {exp_peak:,} bytes (+{rule.slack_bytes:,} allowed). Saving few residuals "
                       f"is not enough if the backward pass then recomputes everything and keeps it all.")
    if failure:
        return CheckResult(name="peak_memory", passed=False, message=failure, details=details,
                           verdict=Verdict.WRONG_POLICY)
    last = runs[-1] if runs else None
    summary = (f"; {last.label}: backward pass peak {last.bwd_peak_bytes:,} bytes, reference "
               f"{last.expected.bwd_peak_bytes:,} bytes" if last else "")
    if not rule.bounds_peak:
        return CheckResult(name="peak_memory", passed=True,
                           message="reported only (this problem's rule is an exact residual signature)" + summary,
                           details=details)
    return CheckResult(name="peak_memory", passed=True,
                       message="backward pass peak live bytes within the reference's on every case" + summary,
                       details=details)
