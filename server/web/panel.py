"""What the verdict panel shows, computed from a verdict report: the checks (judged or only
reported), the residual comparison in the style of `print_saved_residuals` with differences
marked, the bars of the memory charts and the points of the bytes/recompute-FLOPs plane.

Works on the report as JSON (the public verdict JSON, never the instructor-only `internal`
details): fields that a stored report predates are simply missing.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import jinja2

from graders.verdict import VERDICT_EXPLANATIONS, ResidualFact, Verdict, VerdictReport

TEMPLATES = Path(__file__).resolve().parent / "templates"


# --- numbers people can read ------------------------------------------------------------------------


def human_bytes(n: int | float) -> str:
    """`3.5 MiB`, `812 B`: binary units, as memory is counted."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _three_digits(x: float) -> str:
    """3 significant digits at most, no trailing zeros: 1.23, 12.3, 123, 2."""
    text = f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def human_flops(n: int | float) -> str:
    """`812 FLOPs`, `12.6 k FLOPs`, `1.23 M FLOPs`, `4 G FLOPs` (decimal prefixes)."""
    value = float(n)
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{_three_digits(value / scale)} {prefix} FLOPs"
    return f"{value:.0f} FLOP" + ("" if abs(value) == 1 else "s")


FILTERS = {"human_bytes": human_bytes, "human_flops": human_flops}


# --- the report as JSON -----------------------------------------------------------------------------


def report_data(report: VerdictReport | Mapping[str, Any]) -> dict[str, Any]:
    """The report as its public JSON dict."""
    return report.model_dump(mode="json") if isinstance(report, VerdictReport) else dict(report)


# --- checks -----------------------------------------------------------------------------------------


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


# --- the residual comparison ------------------------------------------------------------------------


@dataclass(frozen=True)
class Saved:
    """One side's residual in a row: what produced it (`source`) and `print_saved_residuals`' note."""

    source: str | None
    note: str | None


@dataclass(frozen=True)
class ResidualRow:
    """One row of the comparison: a residual both save (`status` "both"), or one only the
    reference saves ("reference") or only the submission saves ("yours")."""

    aval: str
    nbytes: int
    status: str
    expected: Saved | None
    yours: Saved | None

    @property
    def differs(self) -> bool:
        return self.status != "both"

    @property
    def mark(self) -> str:
        return {"both": "✓", "reference": "−", "yours": "+"}[self.status]

    @property
    def mark_label(self) -> str:
        return {
            "both": "saved by both",
            "reference": "only the reference saves this: you save less",
            "yours": "only you save this: you save more than needed",
        }[self.status]


def _aval(r: Mapping[str, Any]) -> tuple[str, int]:
    """(`f32[16,8]`, bytes) of one residual of the verdict JSON (`ResidualFact`); an offloaded one
    reads `f32[16,8] on pinned_host`."""
    fact = ResidualFact(shape=[int(d) for d in r.get("shape") or []], dtype=str(r.get("dtype", "")))
    kind = str(r.get("memory_kind") or "device")
    text = fact.short() + ("" if kind == "device" else f" on {kind}")
    try:
        return text, fact.nbytes
    except TypeError:  # a dtype numpy does not know: shown, not sized
        return text, 0


def compares_values(residuals: Mapping[str, Any]) -> bool:
    """Whether the verifier said, for every residual, if the other side saves the same value
    (`matched`); otherwise the comparison falls back to shapes and dtypes."""
    items = list(residuals.get("expected") or []) + list(residuals.get("submitted") or [])
    return bool(items) and all(isinstance(r.get("matched"), bool) for r in items)


def residual_rows(residuals: Mapping[str, Any]) -> list[ResidualRow]:
    """Reference against yours, one row per residual, in the order the reference lists them, then
    what only you save. Residuals pair up when the verifier found the same value saved on both
    sides (`matched`); in reports without that, when shape and dtype agree."""
    expected = list(residuals.get("expected") or [])
    submitted = list(residuals.get("submitted") or [])
    if compares_values(residuals):
        exp_ok = [bool(r["matched"]) for r in expected]
        sub_ok = [bool(r["matched"]) for r in submitted]
    else:  # by aval: the first min(count) of each aval on each side pair up
        exp_count = Counter(_aval(r)[0] for r in expected)
        sub_count = Counter(_aval(r)[0] for r in submitted)
        seen: dict[str, Counter[str]] = {"e": Counter(), "s": Counter()}
        exp_ok, sub_ok = [], []
        for side, items, matched in (("e", expected, exp_ok), ("s", submitted, sub_ok)):
            for r in items:
                key = _aval(r)[0]
                seen[side][key] += 1
                matched.append(seen[side][key] <= min(exp_count[key], sub_count[key]))

    def saved(r: Mapping[str, Any]) -> Saved:
        return Saved(source=r.get("source") or None, note=r.get("note") or None)

    used = [False] * len(submitted)
    rows: list[ResidualRow] = []
    for r, ok in zip(expected, exp_ok):
        aval, nbytes = _aval(r)
        partner = None
        if ok:
            partner = next(
                (i for i, s in enumerate(submitted) if sub_ok[i] and not used[i] and _aval(s)[0] == aval), None
            )
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
    return rows


# --- the memory charts ------------------------------------------------------------------------------


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


def memory_bars(residuals: Mapping[str, Any]) -> dict[str, list[Bar]]:
    """Two charts: bytes saved between the passes, and the backward pass's peak live bytes; each
    with yours, the reference's and the same reference without any checkpoint."""
    r = residuals.get
    return {
        "Residual bytes (saved for the backward pass)": _bars(
            [
                ("yours", r("submitted_bytes", 0), "yours"),
                ("reference", r("expected_bytes", 0), "reference"),
                ("no checkpoint", r("no_checkpoint_bytes"), "plain"),
            ]
        ),
        "Backward pass peak live bytes": _bars(
            [
                ("yours", r("submitted_bwd_peak_bytes"), "yours"),
                ("reference", r("expected_bwd_peak_bytes"), "reference"),
                ("no checkpoint", r("no_checkpoint_bwd_peak_bytes"), "plain"),
            ]
        ),
    }


# --- the plane: saved bytes against recompute FLOPs ---------------------------------------------------

# Geometry of the plane's SVG (pixels). x positions are percentages of the SVG's width (so the
# chart fills any width while text keeps its size); the SVG sits in a left gutter of
# PLANE_GUTTER px for the y-axis numbers and draws them at negative x (overflow visible).
PLANE_HEIGHT = 250
PLANE_TOP = 30
PLANE_BOTTOM = 204
PLANE_GUTTER = 50
PLANE_RIGHT = 14
_NOMINAL_WIDTH = 210.0  # labels are placed so that they do not collide even this narrow
_CHAR_W = 7.0  # px per character at 12px, generous
_LINE_H = 14.0
_TICK_CHAR_W = 6.5  # px per character of an 11px axis number


@dataclass(frozen=True)
class Tick:
    position: float  # x: percent; y: px
    text: str
    anchor: str = "middle"


@dataclass(frozen=True)
class PlanePoint:
    """One labelled point. `x` in percent of the plot width, `y` in px; `label_lines` drawn at
    (`x`% + `dx` px, `label_y` px) with `anchor`; `label` empty when another point's label names it."""

    key: str  # "yours" | "reference" | "plain" | "remat"
    name: str
    nbytes: int
    flops: int
    x: float
    y: float
    label_lines: tuple[str, ...] = ()
    dx: float = 0.0
    label_y: float = 0.0
    anchor: str = "start"

    @property
    def description(self) -> str:
        return f"{self.name}: {human_bytes(self.nbytes)} saved, {human_flops(self.flops)} recomputed"


@dataclass(frozen=True)
class Plane:
    points: list[PlanePoint]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    height: int = PLANE_HEIGHT
    top: int = PLANE_TOP
    bottom: int = PLANE_BOTTOM
    gutter: int = PLANE_GUTTER

    @property
    def drawn(self) -> list[PlanePoint]:
        """Points in drawing order: the reference's ring under the others, yours on top."""
        order = ["reference", "remat", "plain", "yours"]
        return sorted(self.points, key=lambda p: order.index(p.key))


def _nice_step(span: float, target: int = 4, base: float = 1.0) -> float:
    """A step of 1, 2, 2.5 or 5 times a power of ten (of `base` units) giving about `target` steps."""
    raw = span / base / max(target, 1)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if m * power >= raw:
            return m * power * base
    return 10 * power * base


def _byte_unit(top: float) -> tuple[float, str]:
    for scale, unit in ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if top >= scale:
            return scale, unit
    return 1, "B"


def _tick_number(x: float) -> str:
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _flops_tick(v: float) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{_tick_number(v / scale)}{prefix}"
    return _tick_number(v)


def _axis(values: list[float], *, binary: bool) -> tuple[float, float, list[tuple[float, str]]]:
    """Range [lo, hi] from zero (or below, for negative values) to a round number above the
    largest value, and its ticks as (value, text). Byte ticks (the x axis) are thinned until their
    numbers fit side by side on the narrowest chart."""
    lo_v, hi_v = min(0.0, min(values)), max(0.0, max(values))
    if hi_v == lo_v:
        return 0.0, 1.0, [(0.0, "0")]
    span = (hi_v - lo_v) * 1.08
    if binary:
        scale, unit = _byte_unit(max(abs(hi_v), abs(lo_v)))
        step = _nice_step(span, base=scale)
        fmt = lambda v: f"{_tick_number(v / scale)} {unit}" if v else "0"  # noqa: E731
    else:
        step = _nice_step(span)
        fmt = _flops_tick
    while True:
        lo = math.floor(lo_v / step) * step
        hi = math.ceil(hi_v * 1.04 / step) * step
        n = int(round((hi - lo) / step))
        ticks = [(lo + i * step, fmt(lo + i * step)) for i in range(n + 1)]
        # the first and last numbers hang inwards from their ticks: 1.5 widths between ticks
        widest = max(len(t) for _, t in ticks) * _TICK_CHAR_W
        if not binary or n <= 1 or _NOMINAL_WIDTH / n >= 1.5 * widest + 8:
            return lo, hi, ticks
        step *= 2


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """Area (px²) two boxes (left, top, right, bottom) share."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def plane(residuals: Mapping[str, Any]) -> Plane | None:
    """Up to four points on (saved residual bytes, backward recompute FLOPs): yours, the
    reference's, no checkpoint (recomputes nothing) and the reference under one plain
    `jax.checkpoint` (everything recomputed). None when fewer than two points have numbers."""
    r = residuals.get
    given = [
        ("yours", "yours", r("submitted_bytes"), r("submitted_recompute_flops")),
        ("reference", "reference", r("expected_bytes"), r("expected_recompute_flops")),
        (
            "plain",
            "no checkpoint",
            r("no_checkpoint_bytes"),
            0 if r("no_checkpoint_bytes") is not None else None,
        ),  # recomputes nothing
        ("remat", "everything recomputed", r("full_remat_bytes"), r("full_remat_recompute_flops")),
    ]
    present = [(k, n, int(b), int(f)) for k, n, b, f in given if b is not None and f is not None]
    if len(present) < 2:
        return None
    x_lo, x_hi, x_ticks = _axis([b for *_, b, _ in present], binary=True)
    y_lo, y_hi, y_ticks = _axis([f for *_, f in present], binary=False)
    plot_h = PLANE_BOTTOM - PLANE_TOP

    def px(v: float) -> float:
        return 100.0 * (v - x_lo) / (x_hi - x_lo)

    def py(v: float) -> float:
        return PLANE_BOTTOM - plot_h * (v - y_lo) / (y_hi - y_lo)

    points = [PlanePoint(key=k, name=n, nbytes=b, flops=f, x=px(b), y=py(f)) for k, n, b, f in present]

    # One label per group of points drawn on top of each other ("yours = reference" when the
    # numbers are equal, "yours, reference" when they only look so at this scale).
    groups: list[list[int]] = []
    for i, p in enumerate(points):
        for g in groups:
            q = points[g[0]]
            if abs(p.x - q.x) * _NOMINAL_WIDTH / 100 < 4 and abs(p.y - q.y) < 4:
                g.append(i)
                break
        else:
            groups.append([i])

    # Place each label beside its point where it fits inside the chart and hits no other label or
    # marker, checked at the narrowest width the chart gets (wider only spreads points apart):
    # greedily, in every order of the (at most four) labels, keeping the best overall.
    W = _NOMINAL_WIDTH
    markers = [(p.x * W / 100 - 11, p.y - 11, p.x * W / 100 + 11, p.y + 11) for p in points]
    # the y-axis title at the top left, and the x-axis numbers and title below the plot
    reserved = [
        (-PLANE_GUTTER, 0, -PLANE_GUTTER + 17 * _CHAR_W, 16),
        (-PLANE_GUTTER, PLANE_BOTTOM + 9, W + PLANE_RIGHT, PLANE_HEIGHT),
    ]

    Box = tuple[float, float, float, float]  # left, top, right, bottom

    def candidates(g: list[int]) -> list[tuple[float, tuple[str, ...], float, float, str, Box]]:
        """(preference, lines, dx, top relative to the point, anchor, box) for each way to put the label."""
        p = points[g[0]]
        same = all((points[i].nbytes, points[i].flops) == (p.nbytes, p.flops) for i in g)
        text = (" = " if same else ", ").join(points[i].name for i in g)  # "=" only when the numbers are equal
        variants: list[tuple[str, ...]] = [(text,)]
        if len(g) == 1 and " " in text and len(text) > 10:
            head, _, tail = text.partition(" ")
            variants.append((head, tail))
        cx = p.x * W / 100
        out: list[tuple[float, tuple[str, ...], float, float, str, Box]] = []
        for v, lines in enumerate(variants):
            width = max(len(s) for s in lines) * _CHAR_W
            height = len(lines) * _LINE_H
            options = [
                (12, -height / 2, "start"),
                (-12, -height / 2, "end"),
                (0, -13 - height, "middle"),
                (0, 13, "middle"),
                (10, -10 - height, "start"),
                (-10, -10 - height, "end"),
                (10, 9, "start"),
                (-10, 9, "end"),
            ]
            for k, (dx, rel_top, anchor) in enumerate(options):
                left = cx + dx if anchor == "start" else cx + dx - width if anchor == "end" else cx - width / 2
                top = p.y + rel_top
                out.append((k + 2.5 * v, lines, dx, rel_top, anchor, (left, top, left + width, top + height)))
        return out

    options = {id(g): candidates(g) for g in groups}
    best_total: float | None = None
    best_choice: list[tuple[list[int], tuple]] = []
    for order in itertools.permutations(groups):
        placed: list[Box] = []
        total = 0.0
        choice = []
        for g in order:
            scored = []
            for cand in options[id(g)]:
                box = cand[5]
                # px outside the chart (a little into the right margin is allowed) ...
                overflow = (
                    max(0.0, -6 - box[0])
                    + max(0.0, box[2] - (W + PLANE_RIGHT))
                    + max(0.0, -box[1])
                    + max(0.0, box[3] - (PLANE_BOTTOM + 8))
                )
                # ... and px² over other labels, the axis texts and other points
                clash = sum(_overlap(box, o) for o in placed + reserved) + sum(
                    _overlap(box, m) for j, m in enumerate(markers) if j not in g
                )
                scored.append((20 * overflow + clash + 5 * cand[0], cand))
            score, cand = min(scored, key=lambda sc: sc[0])
            placed.append(cand[5])
            total += score
            choice.append((g, cand))
        if best_total is None or total < best_total:
            best_total, best_choice = total, choice
    out = list(points)
    for g, (_, lines, dx, rel_top, anchor, _) in best_choice:
        p = points[g[0]]  # 11: from the top of the label's box to the first line's baseline
        out[g[0]] = dataclasses.replace(p, label_lines=lines, dx=dx, label_y=p.y + rel_top + 11, anchor=anchor)

    n = len(x_ticks)
    return Plane(
        points=out,
        x_ticks=[
            Tick(px(v), t, "start" if i == 0 and n > 1 else "end" if i == n - 1 else "middle")
            for i, (v, t) in enumerate(x_ticks)
        ],
        y_ticks=[Tick(py(v), t, "end") for v, t in y_ticks],
    )


@dataclass(frozen=True)
class Recompute:
    """The FLOPs each backward pass spends recomputing what was not saved."""

    yours: int
    reference: int


# --- the diagnosis: what failed, in one sentence ------------------------------------------------------


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


# --- the panel --------------------------------------------------------------------------------------


def panel_context(report: VerdictReport | Mapping[str, Any]) -> dict:
    """Everything `_panel.html` needs."""
    data = report_data(report)
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
        "explanation": VERDICT_EXPLANATIONS[verdict],
        "checks": checks,
        "rows": residual_rows(residuals) if residuals else [],
        "by_value": compares_values(residuals) if residuals else False,
        "charts": memory_bars(residuals) if residuals else {},
        # a loop whose trip count could not be read: the FLOPs are a lower bound, not a point to draw
        "plane": plane(residuals) if residuals and flops_exact else None,
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
    from types import SimpleNamespace

    return (
        panel_environment()
        .get_template("_panel.html")
        .render(record=SimpleNamespace(id=record_id), **panel_context(report))
    )


__all__ = [
    "Diagnosis",
    "diagnose",
    "CheckView",
    "ResidualRow",
    "Saved",
    "Bar",
    "Plane",
    "PlanePoint",
    "Tick",
    "Recompute",
    "human_bytes",
    "human_flops",
    "FILTERS",
    "check_views",
    "residual_rows",
    "compares_values",
    "memory_bars",
    "plane",
    "panel_context",
    "panel_environment",
    "render_panel",
    "report_data",
]
