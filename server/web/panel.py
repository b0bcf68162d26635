"""What the verdict panel shows, computed from a verdict report: the residual comparison in the
style of `print_saved_residuals` with differences marked, and the bars of the memory chart."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from graders.verdict import VERDICT_EXPLANATIONS, ResidualAval, ResidualReport, Verdict, VerdictReport


@dataclass(frozen=True)
class ResidualRow:
    """One aval of the comparison table: how many residuals of it each side saves."""

    aval: str
    nbytes: int
    expected: int
    yours: int
    expected_notes: tuple[str, ...]
    your_notes: tuple[str, ...]

    @property
    def differs(self) -> bool:
        return self.expected != self.yours


@dataclass(frozen=True)
class Bar:
    """One bar of the memory chart (bytes; `fraction` of the chart's largest value)."""

    label: str
    value: int
    fraction: float
    kind: str  # "yours" | "reference" | "plain"


def residual_rows(report: ResidualReport) -> list[ResidualRow]:
    """Expected against yours, one row per aval, in the order the reference lists them."""
    order: list[str] = []
    sizes: dict[str, int] = {}
    notes: dict[tuple[str, str], list[str]] = {}
    counts: dict[str, Counter[str]] = {"expected": Counter(), "yours": Counter()}
    for side, items in (("expected", report.expected), ("yours", report.submitted)):
        for r in items:
            key = r.short()
            if key not in sizes:
                order.append(key)
                sizes[key] = r.nbytes
            counts[side][key] += 1
            if r.note:
                notes.setdefault((side, key), []).append(r.note)
    return [ResidualRow(aval=k, nbytes=sizes[k], expected=counts["expected"][k], yours=counts["yours"][k],
                        expected_notes=tuple(notes.get(("expected", k), [])),
                        your_notes=tuple(notes.get(("yours", k), []))) for k in order]


def _bars(items: list[tuple[str, int | None, str]]) -> list[Bar]:
    present = [(label, value, kind) for label, value, kind in items if value is not None]
    top = max((v for _, v, _ in present), default=0) or 1
    return [Bar(label, value, value / top, kind) for label, value, kind in present]


def memory_bars(report: ResidualReport) -> dict[str, list[Bar]]:
    """Two charts: bytes saved between the passes, and the backward pass's peak live bytes; each
    with yours, the reference's and the same reference without any checkpoint."""
    return {
        "Residual bytes (saved for the backward pass)": _bars([
            ("yours", report.submitted_bytes, "yours"), ("reference", report.expected_bytes, "reference"),
            ("no checkpoint", report.no_checkpoint_bytes, "plain")]),
        "Backward pass peak live bytes": _bars([
            ("yours", report.submitted_bwd_peak_bytes, "yours"),
            ("reference", report.expected_bwd_peak_bytes, "reference"),
            ("no checkpoint", report.no_checkpoint_bwd_peak_bytes, "plain")]),
    }


def panel_context(report: VerdictReport) -> dict:
    """Everything `_panel.html` needs."""
    verdict = report.verdict or Verdict.INTERNAL_ERROR
    residuals = report.residuals
    return {
        "report": report,
        "verdict": verdict.value,
        "accepted": verdict == Verdict.ACCEPTED,
        "explanation": VERDICT_EXPLANATIONS[verdict],
        "rows": residual_rows(residuals) if residuals else [],
        "charts": memory_bars(residuals) if residuals else {},
        "residuals": residuals,
        "failed": [c for c in report.checks if not c.passed],
    }


__all__ = ["ResidualAval", "ResidualRow", "Bar", "residual_rows", "memory_bars", "panel_context"]
