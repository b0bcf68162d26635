"""What the verdict panel shows, computed from a verdict report: the checks (judged or only
reported), the residual comparison in the style of `print_saved_residuals` with differences
marked, the bars of the memory charts and the points of the bytes/recompute-FLOPs plane.

Works on the report as JSON (the public verdict JSON, never the instructor-only `internal`
details): fields that a stored report predates are simply missing.

The numbers' formatting is in `server.web.formatting`, the plane in `server.web.plane`, the
headline in `server.web.diagnosis`, the view models both use in `server.web.views`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2

from graders.artifact_limits import Aval
from graders.checks.comparison import is_bookkeeping
from graders.verdict import VERDICT_EXPLANATIONS, ResidualFact, Verdict, VerdictReport
from graders.verifier.xla_memory import describe as describe_xla
from server.web.budget_view import optimum_values, variants_misleading
from server.web.diagnosis import Diagnosis, Recompute, diagnose
from server.web.formatting import FILTERS
from server.web.plane import plane
from server.web.views import ResidualRow, Saved, check_views

TEMPLATES = Path(__file__).resolve().parent / "templates"


def report_data(report: VerdictReport | Mapping[str, Any]) -> dict[str, Any]:
    """The report as its public JSON dict."""
    return report.model_dump(mode="json") if isinstance(report, VerdictReport) else dict(report)


def _aval(r: Mapping[str, Any]) -> tuple[str, int]:
    """(`f32[16,8]`, bytes) of one residual of the verdict JSON (`ResidualFact`); an offloaded one
    reads `f32[16,8] on pinned_host`. On a mesh, the piece one device keeps and its bytes
    (`ResidualFact.device_shape`, `device_bytes`), as every residual figure there is per device."""
    piece = r.get("device_shape")
    shape = piece if piece is not None else r.get("shape") or []
    aval = Aval(tuple(int(d) for d in shape), str(r.get("dtype", "")))
    kind = str(r.get("memory_kind") or "device")
    text = aval.short() + ("" if kind == "device" else f" on {kind}")
    try:
        return text, int(r["device_bytes"]) if piece is not None and r.get("device_bytes") is not None else aval.nbytes
    except TypeError:  # a dtype numpy does not know: shown, not sized
        return text, 0


def placement(r: Mapping[str, Any]) -> str:
    """On a mesh, how the devices keep one residual: "per device, of f32[32,64]" (each device its
    own piece), "replicated on 4 devices" (each keeps all of it), "replicated on 4 devices: each
    keeps the same values" (pieces of one array that hold the same numbers, `same_pieces`), "per
    device, each piece on 2 devices"; "" on one device."""
    piece, whole = r.get("device_shape"), r.get("global_shape")
    if piece is None:
        return ""
    replicas = int(r.get("replicas") or 1)
    if replicas > 1 and whole is not None and list(piece) == list(whole):
        return f"replicated on {replicas} devices"
    if r.get("same_pieces"):  # every device's piece holds the same numbers
        devices = (r.get("shape") or [0])[0]
        return f"replicated on {devices} devices: each keeps the same values"
    of = f", of {Aval(tuple(int(d) for d in whole), str(r.get('dtype', ''))).short()}" if whole else ""
    return f"per device{of}" + (f", each piece on {replicas} devices" if replicas > 1 else "")


def compares_values(residuals: Mapping[str, Any]) -> bool:
    """Whether the verifier said, for every residual, if the other side saves the same value
    (`matched`); otherwise the comparison falls back to shapes and dtypes."""
    items = list(residuals.get("expected") or []) + list(residuals.get("submitted") or [])
    return bool(items) and all(isinstance(r.get("matched"), bool) for r in items)


OLD_BOOKKEEPING_ELEMENTS = 256  # what reports stored before `ResidualFact.left_out` left out


def _bookkeeping(r: Mapping[str, Any]) -> bool:
    """Whether a listed residual is bookkeeping (`is_bookkeeping`: it carries a reason). A report
    stored before the judge read bookkeeping from the artifacts has no `left_out` field: its
    verdict used the rule of then (an integer residual of at most 256 elements), so its panel does
    too, to show what was judged."""
    try:
        fact = ResidualFact.model_validate(r)
    except (ValueError, TypeError):  # a stored report with a field we no longer read
        return False
    if "left_out" not in r:
        return fact.dtype.startswith(("int", "uint")) and math.prod(fact.shape) <= OLD_BOOKKEEPING_ELEMENTS
    return is_bookkeeping(fact)


def _left_out_note(r: Mapping[str, Any]) -> str:
    """What the panel says of a bookkeeping residual: left out, and why."""
    return f"left out: {r.get('left_out') or 'a loop counter or branch index'}"


def _pairs(expected_aval: str, s: Mapping[str, Any]) -> bool:
    """Whether a submitted residual may stand beside a reference residual of `expected_aval`:
    the same aval, or the same values in another layout (`ResidualFact.layout` names the aval)."""
    return _aval(s)[0] == expected_aval or f"policy's {expected_aval} " in str(s.get("layout") or "")


def _saved_by_both(
    residuals: Mapping[str, Any], expected: list[Mapping[str, Any]], submitted: list[Mapping[str, Any]]
) -> tuple[list[bool], list[bool]]:
    """Per residual of each side, whether the other side saves it too: the verifier's `matched`
    where it compared values, else the first min(count) of each aval on each side."""
    if compares_values(residuals):
        return [bool(r["matched"]) for r in expected], [bool(r["matched"]) for r in submitted]
    exp_count = Counter(_aval(r)[0] for r in expected)
    sub_count = Counter(_aval(r)[0] for r in submitted)
    seen: dict[str, Counter[str]] = {"e": Counter(), "s": Counter()}
    exp_ok: list[bool] = []
    sub_ok: list[bool] = []
    for side, items, matched in (("e", expected, exp_ok), ("s", submitted, sub_ok)):
        for r in items:
            key = _aval(r)[0]
            seen[side][key] += 1
            matched.append(seen[side][key] <= min(exp_count[key], sub_count[key]))
    return exp_ok, sub_ok


def residual_rows(residuals: Mapping[str, Any]) -> list[ResidualRow]:
    """Reference against yours, one row per residual, in the order the reference lists them, then
    what only you save, then the bookkeeping both sides keep (loop counters and branch indices,
    left out of the comparison, each with its reason: `_left_out_note`). Residuals pair up when the verifier found the
    same value saved on both sides (`matched`, in the same layout or another one); in reports
    without that, when shape and dtype agree."""
    everything_expected = list(residuals.get("expected") or [])
    everything_submitted = list(residuals.get("submitted") or [])
    expected = [r for r in everything_expected if not _bookkeeping(r)]
    submitted = [r for r in everything_submitted if not _bookkeeping(r)]
    exp_ok, sub_ok = _saved_by_both(residuals, expected, submitted)

    def saved(r: Mapping[str, Any]) -> Saved:
        note = r.get("layout") or r.get("note") or None
        return Saved(source=r.get("source") or None, note=note, placement=placement(r) or None)

    used = [False] * len(submitted)
    rows: list[ResidualRow] = []
    for r, ok in zip(expected, exp_ok, strict=True):
        aval, nbytes = _aval(r)
        partner = None
        if ok:
            partner = next((i for i, s in enumerate(submitted) if sub_ok[i] and not used[i] and _pairs(aval, s)), None)
            if partner is not None:
                used[partner] = True
        rows.append(
            ResidualRow(
                aval=aval,
                nbytes=nbytes,
                status="both" if ok else "reference",
                expected=saved(r),
                yours=saved(submitted[partner]) if partner is not None else None,
            )
        )
    for i, s in enumerate(submitted):
        if not used[i]:
            aval, nbytes = _aval(s)
            # matched but without a partner left: the same value as one already listed (saved twice)
            rows.append(
                ResidualRow(
                    aval=aval, nbytes=nbytes, status="both" if sub_ok[i] else "yours", expected=None, yours=saved(s)
                )
            )
    return rows + _left_out_rows(everything_expected, everything_submitted)


def _left_out_rows(expected: list[Mapping[str, Any]], submitted: list[Mapping[str, Any]]) -> list[ResidualRow]:
    """A row per bookkeeping residual of either side, said to be left out of the comparison."""
    rows = []
    for side, items in (("reference", expected), ("yours", submitted)):
        for r in items:
            if _bookkeeping(r):
                aval, nbytes = _aval(r)
                mine = side == "yours"
                left_out = Saved(source=None, note=_left_out_note(r))
                rows.append(
                    ResidualRow(
                        aval=aval,
                        nbytes=nbytes,
                        status="left out",
                        expected=None if mine else left_out,
                        yours=left_out if mine else None,
                    )
                )
    return rows


@dataclass(frozen=True)
class Bar:
    """One bar of the memory chart (bytes; `fraction` of the chart's largest value)."""

    label: str
    value: int
    fraction: float
    kind: str  # "yours" | "reference" | "plain"


def _bars(items: list[tuple[str, int | None, str]]) -> list[Bar]:
    present = [(label, value, kind) for label, value, kind in items if value is not None]
    top = max((v for _, v, _ in present), default=0) or 1
    return [Bar(label, value, value / top, kind) for label, value, kind in present]


def on_mesh(residuals: Mapping[str, Any]) -> bool:
    """Whether the report is of a problem on a mesh (its residuals are listed per device)."""
    items = list(residuals.get("expected") or []) + list(residuals.get("submitted") or [])
    return any(r.get("device_shape") is not None for r in items) or bool(residuals.get("expected_xla_memory"))


def memory_bars(residuals: Mapping[str, Any]) -> dict[str, list[Bar]]:
    """Two charts: bytes saved between the passes, and the backward pass's memory; each with
    yours, the reference's and the same reference without any checkpoint. On one device the
    second is the judge's peak live bytes of the backward program; on a mesh, what one device
    holds while it runs by XLA's count (`graders.verifier.xla_memory.held_bytes`), and every bar is
    per device."""
    r = residuals.get
    mesh = on_mesh(residuals)
    if mesh:
        mine, theirs = r("submitted_xla_memory") or {}, r("expected_xla_memory") or {}
        title = "Backward pass buffers per device (XLA: arguments, outputs, temporaries)"
        peaks = (mine.get("bwd_device_bytes"), theirs.get("bwd_device_bytes"), r("no_checkpoint_bwd_device_bytes"))
    else:
        title = "Backward pass peak live bytes"
        plain = None if variants_misleading(residuals) else r("no_checkpoint_bwd_peak_bytes")
        peaks = (r("submitted_bwd_peak_bytes"), r("expected_bwd_peak_bytes"), plain)
    saved = (
        "Residual bytes per device (saved for the backward pass)"
        if mesh
        else "Residual bytes (saved for the backward pass)"
    )
    kept = (r("submitted_bytes", 0), r("expected_bytes", 0), r("no_checkpoint_bytes"))
    return {saved: _sides(kept), title: _sides(peaks)}


def _sides(values: tuple[int | None, int | None, int | None]) -> list[Bar]:
    """Bars of yours, the reference's and the no-checkpoint variant's figure (None: no bar)."""
    sides = (("yours", "yours"), ("reference", "reference"), ("no checkpoint", "plain"))
    return _bars([(who, value, kind) for (who, kind), value in zip(sides, values, strict=True)])


def xla_lines(residuals: Mapping[str, Any]) -> list[tuple[str, str]]:
    """On a mesh, (whose, XLA's figures as a sentence) for yours and the reference's
    (`graders.verifier.xla_memory.describe`); [] on one device."""
    lines = []
    for who, key in (("yours", "submitted_xla_memory"), ("reference", "expected_xla_memory")):
        text = describe_xla(residuals.get(key) or {})
        if text:
            lines.append((who, text))
    return lines


NOT_GRADED = "NOT GRADED"  # the chip of a submission that ended without a verdict (its problem refused)


def _not_graded(data: dict[str, Any]) -> dict:
    """The panel of a submission that ended without a verdict (status "failed": its problem was
    refused before it was graded): what its checks say, and that it does not count."""
    checks = check_views(list(data.get("checks") or []))
    said = next((c.message for c in checks if c.state == "fail"), "the judge did not grade this submission")
    words = "this submission was not graded and does not count; submit again once the problem is served"
    return {
        "report": data,
        "verdict": NOT_GRADED,
        "accepted": False,
        "explanation": words,
        "checks": checks,
        "rows": [],
        "by_value": False,
        "budget": None,
        "optimum_values": [],
        "charts": {},
        "plane": None,
        "comm_plane": None,
        "mesh": False,
        "xla": [],
        "flops_exact": True,
        "recompute": None,
        "residuals": None,
        "failed": [c for c in checks if c.state == "fail"],
        "diagnosis": Diagnosis(said, "", ""),
    }


def _explanation(verdict: Verdict, residuals: Mapping[str, Any] | None) -> str:
    """The verdict's words; an ACCEPTED budget problem's say what its score then means."""
    if verdict == Verdict.ACCEPTED and residuals and residuals.get("budget_bytes") is not None:
        return (
            "Values and gradients are right and the program fits the memory budget; the score says how close "
            "its recomputation comes to the best known within it."
        )
    return VERDICT_EXPLANATIONS[verdict]


def panel_context(report: VerdictReport | Mapping[str, Any]) -> dict:
    """Everything `_panel.html` needs (a submission that ended without a verdict: `_not_graded`)."""
    data = report_data(report)
    if not data.get("verdict") and data.get("status") == "failed":
        return _not_graded(data)
    try:
        verdict = Verdict(data.get("verdict") or Verdict.INTERNAL_ERROR)
    except ValueError:
        verdict = Verdict.INTERNAL_ERROR
    residuals = data.get("residuals") or None
    recompute = None
    if (
        residuals
        and residuals.get("submitted_recompute_flops") is not None
        and residuals.get("expected_recompute_flops") is not None
    ):
        recompute = Recompute(int(residuals["submitted_recompute_flops"]), int(residuals["expected_recompute_flops"]))
    checks = check_views(list(data.get("checks") or []))
    flops_exact = not residuals or residuals.get("flops_exact", True) is not False
    return {
        "report": data,
        "verdict": verdict.value,
        "accepted": verdict == Verdict.ACCEPTED,
        "explanation": _explanation(verdict, residuals),
        "checks": checks,
        "rows": residual_rows(residuals) if residuals else [],
        "by_value": compares_values(residuals) if residuals else False,
        "budget": residuals.get("budget_bytes") if residuals else None,
        "optimum_values": optimum_values(residuals) if residuals else [],
        "charts": memory_bars(residuals) if residuals else {},
        # a loop whose trip count could not be read: the FLOPs are a lower bound, not a point to draw
        "plane": plane(residuals) if residuals and flops_exact else None,
        "comm_plane": plane(residuals, communication=True) if residuals else None,
        "mesh": on_mesh(residuals) if residuals else False,
        "xla": xla_lines(residuals) if residuals else [],
        "flops_exact": flops_exact,
        "recompute": recompute,
        "residuals": residuals,
        "failed": [c for c in checks if c.state == "fail"],
        "diagnosis": diagnose(verdict, checks, residual_rows(residuals) if residuals else [], residuals),
    }


def panel_environment() -> jinja2.Environment:
    """A Jinja environment for the panel alone (tests, web/dev/mock_server.py); the pages use
    their own with the same filters."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True)
    env.filters.update(FILTERS)
    return env


def render_panel(report: VerdictReport | Mapping[str, Any], record_id: str) -> str:
    """The panel's HTML for a report, as `/submissions/<id>/panel` serves it."""
    return (
        panel_environment()
        .get_template("_panel.html")
        .render(record=SimpleNamespace(id=record_id), **panel_context(report))
    )
