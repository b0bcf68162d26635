"""The bytes/recompute-FLOPs plane of the verdict panel, drawn as SVG by the template from what
`plane` computes: axes with readable ticks, one point per program (yours, the reference's, no
checkpoint) and labels placed so they do not overlap."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.web.budget_view import schedule_points, variants_misleading
from server.web.formatting import human_bytes, human_flops

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
LISTED_SCHEDULES = 8  # a budget problem's schedules the legend names; of more, only those on the frontier


@dataclass(frozen=True)
class Tick:
    position: float  # x: percent; y: px
    text: str
    anchor: str = "middle"


@dataclass(frozen=True)
class PlanePoint:
    """One labelled point. `x` in percent of the plot width, `y` in px; `label_lines` drawn at
    (`x`% + `dx` px, `label_y` px) with `anchor`; `label` empty when another point's label names it."""

    key: str  # "yours" | "reference" | "plain" | "remat" | "schedule" (a budget problem's) | "class"
    name: str
    nbytes: int
    y_value: int  # FLOPs recomputed, or with `y_in_bytes` bytes received
    x: float
    y: float
    label_lines: tuple[str, ...] = ()
    dx: float = 0.0
    label_y: float = 0.0
    anchor: str = "start"
    y_in_bytes: bool = False  # the y value is bytes communicated, not FLOPs recomputed
    x_word: str = "saved"  # what the x value (`nbytes`) is: "saved", or "at its peak" on a budget of the peak
    listed: bool = True  # named in the legend (of many schedules, those on the frontier: `LISTED_SCHEDULES`)

    @property
    def y_text(self) -> str:
        """The y value as the legend says it: "1.5 MFLOPs recomputed" or "143 KiB received"."""
        if self.y_in_bytes:
            return f"{human_bytes(self.y_value)} received"
        return f"{human_flops(self.y_value)} recomputed"

    @property
    def description(self) -> str:
        return f"{self.name}: {human_bytes(self.nbytes)} {self.x_word}, {self.y_text}"


@dataclass(frozen=True)
class Plane:
    points: list[PlanePoint]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    height: int = PLANE_HEIGHT
    top: int = PLANE_TOP
    bottom: int = PLANE_BOTTOM
    gutter: int = PLANE_GUTTER
    # a budget problem: the frontier as steps (x1 %, y1 px, x2 %, y2 px) and the budget's x (%)
    frontier: list[tuple[float, float, float, float]] = dataclasses.field(default_factory=list)
    budget_x: float | None = None

    @property
    def drawn(self) -> list[PlanePoint]:
        """Points in drawing order: the reference's ring under the others, yours on top."""
        order = ["schedule", "class", "reference", "remat", "plain", "yours"]
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


def _recompute_points(residuals: Mapping[str, Any], *, peak: bool) -> list[tuple[str, str, Any, Any]]:
    """(key, name, x, recompute FLOPs) of yours, the reference's, no checkpoint (recomputes
    nothing) and everything recomputed; x the saved residual bytes or, with `peak`, the backward
    pass's peak (the variants left out where `variants_misleading`)."""
    r = residuals.get
    suffix = "_bwd_peak_bytes" if peak else "_bytes"
    mine = [
        ("yours", "yours", r("submitted" + suffix), r("submitted_recompute_flops")),
        ("reference", "reference", r("expected" + suffix), r("expected_recompute_flops")),
    ]
    if variants_misleading(residuals):
        return mine
    plain = r("no_checkpoint" + suffix)
    return mine + [
        ("plain", "no checkpoint", plain, 0 if plain is not None else None),  # recomputes nothing
        ("remat", "everything recomputed", r("full_remat" + suffix), r("full_remat_recompute_flops")),
    ]


def _communication_points(residuals: Mapping[str, Any]) -> list[tuple[str, str, Any, Any]]:
    r = residuals.get
    return [
        ("yours", "yours", r("submitted_bytes"), r("submitted_bwd_received_bytes")),
        ("reference", "reference", r("expected_bytes"), r("expected_bwd_received_bytes")),
        ("plain", "no checkpoint", r("no_checkpoint_bytes"), r("no_checkpoint_bwd_received_bytes")),
        ("remat", "everything recomputed", r("full_remat_bytes"), r("full_remat_bwd_received_bytes")),
    ]


@dataclass(frozen=True)
class _Scales:
    """A plane's axes: ranges and ticks from the values drawn, and where a value lands (x in
    percent of the plot's width, y in px)."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]

    @classmethod
    def of(cls, xs: list[float], ys: list[float], *, y_binary: bool) -> _Scales:
        """Bytes on x; FLOPs (or bytes, `y_binary`) on y (`_axis`)."""
        x_lo, x_hi, x_ticks = _axis(xs, binary=True)
        y_lo, y_hi, y_ticks = _axis(ys, binary=y_binary)
        return cls(x_lo, x_hi, y_lo, y_hi, x_ticks, y_ticks)

    def px(self, v: float) -> float:
        return 100.0 * (v - self.x_lo) / (self.x_hi - self.x_lo)

    def py(self, v: float) -> float:
        return PLANE_BOTTOM - (PLANE_BOTTOM - PLANE_TOP) * (v - self.y_lo) / (self.y_hi - self.y_lo)

    def plane(self, points: list[PlanePoint], steps: list[tuple[int, int]], budget: int | None) -> Plane:
        """The `Plane` of `points`, with a frontier's steps and a budget's line where given."""
        n = len(self.x_ticks)
        return Plane(
            points=points,
            x_ticks=[
                Tick(self.px(v), t, "start" if i == 0 and n > 1 else "end" if i == n - 1 else "middle")
                for i, (v, t) in enumerate(self.x_ticks)
            ],
            y_ticks=[Tick(self.py(v), t, "end") for v, t in self.y_ticks],
            frontier=_segments(steps, self.px, self.py, self.px(self.x_hi)),
            budget_x=self.px(budget) if budget is not None else None,
        )


def _segments(
    steps: list[tuple[int, int]], px: Callable[[float], float], py: Callable[[float], float], right: float
) -> list[tuple[float, float, float, float]]:
    """The frontier (bytes, least recompute), fewest recomputation first, as the steps of the
    least recompute at each budget: that of the point with the most bytes at most the budget."""
    segments = []
    for i, (b, f) in enumerate(steps):
        end = px(steps[i - 1][0]) if i else right
        segments.append((px(b), py(f), end, py(f)))
        if i:  # at the previous point's bytes the least recompute drops to its
            segments.append((end, py(f), end, py(steps[i - 1][1])))
    return segments


def class_plane(
    points: list[tuple[int, int, bool]], frontier: Sequence[Mapping[str, Any]] | None = None, budget: int | None = None
) -> Plane | None:
    """A class's points on (saved residual bytes, recompute FLOPs), the viewer's own marked
    (`points`: bytes, FLOPs, mine), with a budget problem's frontier and budget; unlabelled (the
    board's table names them). None without two points to draw."""
    steps = _frontier_points({"frontier": frontier or []})
    if len(points) + len(steps) < 2:
        return None
    xs = [float(b) for b, _, _ in points] + [float(b) for b, _ in steps] + ([float(budget)] if budget else [])
    scales = _Scales.of(xs, [float(f) for _, f, _ in points] + [float(f) for _, f in steps], y_binary=False)
    drawn = [
        PlanePoint(key="yours" if mine else "class", name="you" if mine else "a classmate", nbytes=b, y_value=f,
                   x=scales.px(b), y=scales.py(f))
        for b, f, mine in points
    ]  # fmt: skip
    return scales.plane(drawn, steps, budget or None)


def _frontier_points(residuals: Mapping[str, Any]) -> list[tuple[int, int]]:
    """A budget problem's frontier as (bytes, least recompute FLOPs), fewest recomputation first
    (`ResidualReport.frontier`); [] otherwise."""
    out = []
    for point in residuals.get("frontier") or []:
        if point.get("bytes") is not None and point.get("flops") is not None:
            out.append((int(point["bytes"]), int(point["flops"])))
    return sorted(out, key=lambda p: (-p[0], p[1]))


def plane(residuals: Mapping[str, Any], *, communication: bool = False) -> Plane | None:
    """Up to four labelled points: yours, the reference's, no checkpoint (recomputes nothing) and
    the reference under one plain `jax.checkpoint` (everything recomputed), and on a budget problem
    its named schedules, unlabelled (the legend names them). x is the saved residual bytes (per
    device on a mesh), or on a budget of the peak the backward pass's static peak; y the backward
    pass's recompute FLOPs or, with `communication` (a mesh), the bytes one device receives through
    its backward pass's collectives (`graders.verifier.collectives`). None when fewer than two
    points have numbers."""
    peak = not communication and residuals.get("budget_of") == "peak"
    given = _communication_points(residuals) if communication else _recompute_points(residuals, peak=peak)
    present = [(k, n, int(b), int(f)) for k, n, b, f in given if b is not None and f is not None]
    extra = [] if communication else schedule_points(residuals, peak=peak)
    if len(present) < 2:
        return None
    steps = [] if communication else _frontier_points(residuals)
    budget = None if communication else residuals.get("budget_bytes")
    xs = [float(b) for *_, b, _ in present + extra] + [float(b) for b, _ in steps]
    xs += [float(budget)] if budget is not None else []
    ys = [float(f) for *_, f in present + extra] + [float(f) for _, f in steps]
    scales = _Scales.of(xs, ys, y_binary=communication)
    word = "at its peak" if peak else "saved"

    def point(k: str, n: str, b: int, f: int) -> PlanePoint:
        return PlanePoint(
            key=k, name=n, nbytes=b, y_value=f, x=scales.px(b), y=scales.py(f), y_in_bytes=communication, x_word=word
        )

    points = [point(*p) for p in present]
    out = list(points)
    for g, (_, lines, dx, rel_top, anchor, _) in _place_labels(points, _groups_on_top(points)):
        p = points[g[0]]  # 11: from the top of the label's box to the first line's baseline
        out[g[0]] = dataclasses.replace(p, label_lines=lines, dx=dx, label_y=p.y + rel_top + 11, anchor=anchor)
    on_frontier = set(steps)
    drawn = [
        dataclasses.replace(point(*p), listed=len(extra) <= LISTED_SCHEDULES or (p[2], p[3]) in on_frontier)
        for p in extra
    ]
    return scales.plane(out + drawn, steps, int(budget) if budget is not None else None)


Box = tuple[float, float, float, float]  # left, top, right, bottom
Candidate = tuple[float, tuple[str, ...], float, float, str, Box]  # (preference, lines, dx, top, anchor, box)


def _groups_on_top(points: list[PlanePoint]) -> list[list[int]]:
    """One label per group of points drawn on top of each other ("yours = reference" when the
    numbers are equal, "yours, reference" when they only look so at this scale)."""
    groups: list[list[int]] = []
    for i, p in enumerate(points):
        for g in groups:
            q = points[g[0]]
            if abs(p.x - q.x) * _NOMINAL_WIDTH / 100 < 4 and abs(p.y - q.y) < 4:
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


def _label_candidates(points: list[PlanePoint], g: list[int]) -> list[Candidate]:
    """(preference, lines, dx, top relative to the point, anchor, box) for each way to put the
    label of group `g` (at the chart's narrowest width, `_NOMINAL_WIDTH`)."""
    W = _NOMINAL_WIDTH
    p = points[g[0]]
    same = all((points[i].nbytes, points[i].y_value) == (p.nbytes, p.y_value) for i in g)
    text = (" = " if same else ", ").join(points[i].name for i in g)  # "=" only when the numbers are equal
    variants: list[tuple[str, ...]] = [(text,)]
    if len(g) == 1 and " " in text and len(text) > 10:
        head, _, tail = text.partition(" ")
        variants.append((head, tail))
    cx = p.x * W / 100
    out: list[Candidate] = []
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


def _place_labels(points: list[PlanePoint], groups: list[list[int]]) -> list[tuple[list[int], Candidate]]:
    """Places each group's label beside its point where it fits inside the chart and hits no other
    label or marker, checked at the narrowest width the chart gets (wider only spreads points
    apart): greedily, in every order of the (at most four) labels, keeping the best overall."""
    W = _NOMINAL_WIDTH
    markers = [(p.x * W / 100 - 11, p.y - 11, p.x * W / 100 + 11, p.y + 11) for p in points]
    # the y-axis title at the top left, and the x-axis numbers and title below the plot
    reserved: list[Box] = [
        (-PLANE_GUTTER, 0, -PLANE_GUTTER + 17 * _CHAR_W, 16),
        (-PLANE_GUTTER, PLANE_BOTTOM + 9, W + PLANE_RIGHT, PLANE_HEIGHT),
    ]
    options = {id(g): _label_candidates(points, g) for g in groups}
    best_total: float | None = None
    best_choice: list[tuple[list[int], Candidate]] = []
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
    return best_choice
