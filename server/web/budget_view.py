"""What the verdict panel says of a budget problem's optimum: the values it keeps, counted by
provenance (the op that makes each, its type), against the submission's residuals by the same
key, so a student sees which values the best policy within the budget keeps that theirs does not
(`ResidualReport.optimum`, `graders.reference.budget_facts`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graders.artifact_limits import Aval


@dataclass(frozen=True)
class KeptValue:
    """One kind of value the optimum keeps: `label` (`dot_general f32[64,64]`, `argument x
    f32[64,64]`), how many of it the optimum keeps and how many the submission does."""

    label: str
    optimum: int
    yours: int

    @property
    def missing(self) -> int:
        return max(0, self.optimum - self.yours)


def _key(fact: Mapping[str, Any]) -> str:
    """A submitted residual as the optimum's labels name values: `<source> <aval>`."""
    try:
        aval = Aval(tuple(int(d) for d in fact.get("shape") or []), str(fact.get("dtype", ""))).short()
    except (TypeError, ValueError):
        return ""
    return f"{fact.get('source') or 'a value'} {aval}"


def optimum_values(residuals: Mapping[str, Any]) -> list[KeptValue]:
    """The optimum's kept values by label, those the submission lacks first; [] when the report
    has no optimum (not a budget problem, or a report stored before)."""
    saved = (residuals.get("optimum") or {}).get("saved") or []
    if not isinstance(saved, list) or not saved:
        return []
    theirs = Counter(str(label) for label in saved)
    mine = Counter(_key(f) for f in residuals.get("submitted") or [] if isinstance(f, Mapping))
    rows = [KeptValue(label, n, min(mine.get(label, 0), n)) for label, n in theirs.items()]
    return sorted(rows, key=lambda r: (-r.missing, r.label))


def variants_misleading(residuals: Mapping[str, Any]) -> bool:
    """Whether the report's no-checkpoint and everything-recomputed variants are left off its
    charts: on a budget of the backward pass's peak with named schedules. They are the reference
    with its checkpoints removed or wrapped, and their peak follows the reference's structure, not
    a plain program's (the scan problem's reference without checkpoints peaks at 1.8 MiB, a plain
    scan at 2.5 MiB); the schedules hold the plain program a student would write."""
    return residuals.get("budget_of") == "peak" and bool(residuals.get("schedules"))


def schedule_points(residuals: Mapping[str, Any], *, peak: bool) -> list[tuple[str, str, int, int]]:
    """A budget problem's named schedules as measured (`ResidualReport.schedules`: the uniform
    heuristics an author lists), as ("schedule", label, bytes, recompute FLOPs): bytes saved, or
    with `peak` the backward pass's peak. [] for another problem or a report stored before."""
    out = []
    for s in residuals.get("schedules") or []:
        if not isinstance(s, Mapping):
            continue
        nbytes, flops = s.get("peak_bytes" if peak else "bytes"), s.get("flops")
        if isinstance(nbytes, int) and isinstance(flops, int):
            out.append(("schedule", str(s.get("label", ""))[:60], nbytes, flops))
    return out
