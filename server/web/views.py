"""The verdict panel's view models (a check line, a row of the residual comparison), shared by the
panel (`server.web.panel`) and its diagnosis (`server.web.diagnosis`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CheckView:
    """One check line. `state`: "pass", "fail", or "reported" (judged=false: only reported, so
    neither a tick nor a cross)."""

    name: str
    message: str
    state: str

    @property
    def mark(self) -> str:
        return {"pass": "✓", "fail": "✗", "reported": "i"}[self.state]

    @property
    def mark_label(self) -> str:
        return {"pass": "passed", "fail": "failed", "reported": "reported only, not judged"}[self.state]


def check_views(checks: list[Mapping[str, Any]]) -> list[CheckView]:
    views = []
    for c in checks:
        judged = c.get("judged")
        state = "reported" if judged is False else "pass" if c.get("passed") else "fail"
        views.append(CheckView(name=str(c.get("name", "")), message=str(c.get("message", "")), state=state))
    return views


@dataclass(frozen=True)
class Saved:
    """One side's residual in a row: what produced it (`source`) and `print_saved_residuals`' note."""

    source: str | None
    note: str | None
    placement: str | None = None  # on a mesh, how the devices keep it (`server.web.panel.placement`)


@dataclass(frozen=True)
class ResidualRow:
    """One row of the comparison: a residual both save (`status` "both"), one only the
    reference saves ("reference") or only the submission saves ("yours"), or bookkeeping (a loop
    counter or branch index) that neither side is judged on ("left out")."""

    aval: str
    nbytes: int
    status: str
    expected: Saved | None
    yours: Saved | None

    @property
    def differs(self) -> bool:
        return self.status not in ("both", "left out")

    @property
    def mark(self) -> str:
        return {"both": "✓", "reference": "−", "yours": "+", "left out": "·"}[self.status]

    @property
    def mark_label(self) -> str:
        return {
            "both": "saved by both",
            "reference": "only the reference saves this: you save less",
            "yours": "only you save this: you save more than needed",
            "left out": "bookkeeping that carries nothing about the inputs: left out of the comparison",
        }[self.status]
