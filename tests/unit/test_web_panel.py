"""The verdict panel rendered from report dicts, without a server or a browser: the plane of saved
bytes against backward recompute FLOPs, checks that were only reported (judged=false), and the
residual table's value-based marking (`source`, `matched`). Reports stored before those fields
existed must still render."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from graders.verdict import VerdictReport
from server.web.formatting import human_bytes, human_flops
from server.web.panel import panel_context, render_panel
from server.web.plane import _CHAR_W, _LINE_H, _NOMINAL_WIDTH, plane

CANNED = Path(__file__).resolve().parents[2] / "web" / "dev" / "verdicts"


def fact(shape: list[int], source: str | None, matched: bool | None, note: str | None = None) -> dict[str, Any]:
    return {"shape": shape, "dtype": "float32", "note": note, "source": source, "matched": matched}


REPORT: dict[str, Any] = {
    "id": "r1",
    "problem": "remat_sin_sin",
    "problem_version": "2",
    "status": "done",
    "verdict": "WRONG_POLICY",
    "score": 0.0,
    "stdout": "",
    "stderr": "",
    "timing_ms": {"total": 1500.0},
    "jax_version": "0.10.2",
    "checks": [
        {"name": "value", "passed": True, "judged": True, "message": "values match", "details": {}},
        {"name": "residuals", "passed": False, "judged": True, "message": "you save sin(x)", "details": {}},
        {
            "name": "peak_memory",
            "passed": True,
            "judged": False,
            "message": "peak_memory: reported only",
            "details": {},
        },
    ],
    "residuals": {
        "case": "small",
        "expected": [fact([1024], "argument x", True), fact([1024], "cosine", False)],
        "submitted": [fact([1024], "argument x", True), fact([1024], "sine", False, "output of sin")],
        "expected_bytes": 8192,
        "submitted_bytes": 8192,
        "no_checkpoint_bytes": 16384,
        "expected_bwd_peak_bytes": 20000,
        "submitted_bwd_peak_bytes": 21000,
        "no_checkpoint_bwd_peak_bytes": 24000,
        "expected_bwd_flops": 5120,
        "submitted_bwd_flops": 6144,
        "no_checkpoint_bwd_flops": 4096,
        "expected_recompute_flops": 1024,
        "submitted_recompute_flops": 2048,
        "full_remat_bytes": 4096,
        "full_remat_bwd_flops": 7_500_000,
        "full_remat_recompute_flops": 7_495_904,
        "full_remat_bwd_peak_bytes": 26000,
    },
}


def plane_svg(html: str) -> ET.Element:
    found = re.search(r'<svg class="plane-svg".*?</svg>', html, re.S)
    assert found, "no plane chart"
    return ET.fromstring(found.group(0))


def texts(svg: ET.Element, cls: str) -> list[str]:
    """The texts of class `cls` (a label's lines joined with spaces)."""
    return [
        " ".join(s.text or "" for s in t.iter("tspan")) or "".join(t.itertext())
        for t in svg.iter("text")
        if cls in (t.get("class") or "").split()
    ]


def check_items(html: str) -> dict[str, str]:
    """check name -> its <li> HTML."""
    return dict(re.findall(r'<li class="check [a-z]+" data-check="([a-z_]+)">(.*?)</li>', html, re.S))


def test_numbers_read_like_people_write_them() -> None:
    assert human_flops(0) == "0 FLOPs" and human_flops(1) == "1 FLOP" and human_flops(812) == "812 FLOPs"
    assert human_flops(16_384) == "16.4 k FLOPs" and human_flops(6_316_032) == "6.32 M FLOPs"
    assert human_flops(4e9) == "4 G FLOPs"
    assert human_bytes(812) == "812 B" and human_bytes(180_224) == "176.0 KiB" and human_bytes(3 << 20) == "3.0 MiB"


def test_the_plane_shows_four_labelled_points_with_units() -> None:
    html = render_panel(REPORT, "r1")
    svg = plane_svg(html)
    points = {g.get("data-point"): "".join(g.find("title").itertext()) for g in svg.iter("g")}
    assert set(points) == {"yours", "reference", "plain", "remat"}
    assert points["yours"] == "yours: 8.0 KiB saved, 2.05 k FLOPs recomputed"
    assert points["plain"] == "no checkpoint: 16.0 KiB saved, 0 FLOPs recomputed"
    assert points["remat"] == "everything recomputed: 4.0 KiB saved, 7.5 M FLOPs recomputed"
    # yours (2 k FLOPs) and the reference's (1 k) are one spot next to 7.5 M: one label names both
    assert sorted(texts(svg, "point-label")) == ["everything recomputed", "no checkpoint", "yours, reference"]
    titles = texts(svg, "axis-title")
    assert any("FLOPs" in t for t in titles) and any("bytes" in t for t in titles)
    ticks = texts(svg, "tick")
    assert any(t.endswith("KiB") for t in ticks) and any(t.endswith("M") for t in ticks)
    # readable: no text under 11px, and x positions in percent (the chart scales to any width)
    css = (Path(__file__).resolve().parents[2] / "server" / "web" / "static" / "style.css").read_text()
    for cls in ("tick", "axis-title", "point-label"):
        size = re.search(r"\." + cls + r" \{[^}]*font-size: (\d+)px", css)
        assert size and int(size.group(1)) >= 11, cls
    circles = list(svg.iter("circle"))
    assert circles and all(c.get("cx", "").endswith("%") for c in circles)
    # the legend lists the exact numbers too (and works as the chart's text alternative)
    assert "everything recomputed</strong> <span" in html and "7,495,904 FLOPs" in html
    # on a smaller scale the four points get a label each
    report = copy.deepcopy(REPORT)
    report["residuals"]["full_remat_recompute_flops"] = 3072
    small = plane_svg(render_panel(report, "r1"))
    assert sorted(texts(small, "point-label")) == ["everything recomputed", "no checkpoint", "reference", "yours"]


def test_point_labels_do_not_collide_even_on_a_narrow_chart() -> None:
    for name in ("wrong_policy", "accepted"):
        chart = plane(json.loads((CANNED / f"{name}.json").read_text())["residuals"])
        assert chart is not None
        boxes = []
        for p in chart.points:
            if not p.label_lines:
                continue
            width = max(len(s) for s in p.label_lines) * _CHAR_W
            x = p.x * _NOMINAL_WIDTH / 100 + p.dx
            left = x if p.anchor == "start" else x - width if p.anchor == "end" else x - width / 2
            top = p.label_y - 11
            boxes.append((left, top, left + width, top + len(p.label_lines) * _LINE_H))
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (name, a, b)


def test_points_on_top_of_each_other_share_one_label() -> None:
    report = copy.deepcopy(REPORT)
    report["residuals"]["submitted_recompute_flops"] = 1024  # the same point as the reference
    chart = plane(report["residuals"])
    assert chart is not None
    labelled = [p.label_lines for p in chart.points if p.label_lines]
    assert ("yours = reference",) in labelled and len(labelled) == 3


def test_points_without_numbers_are_left_out_and_one_point_is_no_chart() -> None:
    report = copy.deepcopy(REPORT)
    for key in ("full_remat_bytes", "full_remat_recompute_flops"):
        report["residuals"][key] = None
    svg = plane_svg(render_panel(report, "r1"))
    assert {g.get("data-point") for g in svg.iter("g")} == {"yours", "reference", "plain"}
    report["residuals"].update(expected_recompute_flops=None, submitted_recompute_flops=None)
    html = render_panel(report, "r1")
    assert 'id="plane-chart"' not in html and 'id="recompute-line"' not in html


def test_a_check_only_reported_gets_no_tick() -> None:
    items = check_items(render_panel(REPORT, "r1"))
    assert "✓" in items["value"] and "✗" in items["residuals"]
    reported = items["peak_memory"]
    assert "✓" not in reported and "✗" not in reported and "passed" not in reported
    assert 'aria-label="reported only, not judged"' in reported and "reported only · not judged" in reported
    assert 'class="check reported" data-check="peak_memory"' in render_panel(REPORT, "r1")


def test_residuals_are_marked_by_value_with_their_source() -> None:
    html = render_panel(REPORT, "r1")
    table = re.search(r'<table class="residuals".*?</table>', html, re.S).group(0)
    assert 'data-compared="values"' in table
    rows = re.findall(r'<tr class="([^"]*)">(.*?)</tr>', table, re.S)
    assert [cls for cls, _ in rows] == ["same", "differs only-reference", "differs only-yours"]
    # same shape, different values: the shapes alone would have called these equal
    assert ">cosine<" in rows[1][1] and "not saved" in rows[1][1]
    assert ">sine<" in rows[2][1] and "output of sin" in rows[2][1] and "not saved" in rows[2][1]
    assert ">argument x<" in rows[0][1]
    legend = re.search(r'<p class="legend".*?</p>', html, re.S).group(0)
    assert "only the reference saves it" in legend and "only you save it" in legend
    line = " ".join(re.search(r'<p class="recompute".*?</p>', html, re.S).group(0).split())
    assert re.search(
        r"Your backward pass recomputes <strong[^>]*>2.05 k FLOPs</strong>; the reference’s "
        r"recomputes <strong[^>]*>1.02 k FLOPs</strong>",
        line,
    ), line


def test_a_loop_counter_is_listed_as_left_out_and_another_layout_beside_its_value() -> None:
    """A fori_loop's counter is neither "not saved by the required policy" nor a difference; a
    weight kept transposed stands beside the reference's weight, said to be in another layout."""
    report = copy.deepcopy(REPORT)
    transposed = fact([16, 64], "argument w1", True)
    transposed["layout"] = "the same values as the policy's f32[64,16] in another layout"
    counter = {
        "shape": [8],
        "dtype": "int32",
        "note": None,
        "source": "iota",
        "matched": False,
        "left_out": "no argument's data flows into it (a loop counter or index)",
    }
    report["residuals"]["expected"] = [fact([64, 16], "argument w1", True)]
    report["residuals"]["submitted"] = [transposed, counter]
    html = render_panel(report, "r1")
    table = re.search(r'<table class="residuals".*?</table>', html, re.S).group(0)
    rows = re.findall(r'<tr class="([^"]*)">(.*?)</tr>', table, re.S)
    assert [cls for cls, _ in rows] == ["same", "same"]
    assert "in another layout" in rows[0][1] and "f32[64,16]" in rows[0][1]
    assert "left out: no argument&#39;s data flows into it" in rows[1][1] and "i32[8]" in rows[1][1]
    assert "not saved by the required policy" not in html
    assert "not saved" not in rows[1][1] and "left out of the comparison" in html


def test_a_report_stored_before_the_new_fields_still_renders() -> None:
    old = json.loads((CANNED / "old_report.json").read_text())
    assert "judged" not in json.dumps(old) and "flops" not in json.dumps(old)
    html = render_panel(VerdictReport.model_validate(old), "old")
    assert 'id="plane-chart"' not in html and 'id="recompute-line"' not in html
    assert 'data-compared="shapes"' in html and "Compared by shape and dtype only." in html
    items = check_items(html)
    assert items and all("✓" in v or "✗" in v for v in items.values())
    assert '<tr class="differs only-yours">' in html and '<tr class="differs only-reference">' in html


@pytest.mark.parametrize("name", ["wrong_policy", "accepted"])
def test_the_panel_from_the_verdict_model_equals_the_panel_from_its_json(name: str) -> None:
    """The pages load stored reports through the verdict model: nothing the panel shows is lost."""
    stored = json.loads((CANNED / f"{name}.json").read_text())
    via_model = panel_context(VerdictReport.model_validate(stored))
    direct = panel_context(stored)
    assert via_model["plane"] == direct["plane"] and via_model["plane"] is not None
    assert via_model["rows"] == direct["rows"] and via_model["checks"] == direct["checks"]
    assert [c.state for c in via_model["checks"]][-1] == "reported"


def test_instructor_only_details_never_reach_the_panel() -> None:
    stored = json.loads((CANNED / "wrong_policy.json").read_text())
    report = VerdictReport.model_validate(stored)
    report.checks[0].internal = {"error": "Traceback (most recent call last): /work/secret/path.py"}
    assert "/work/secret" not in render_panel(report, "x")


def _check(name: str, passed: bool, judged: bool = True, message: str = "") -> dict:
    return {"name": name, "passed": passed, "judged": judged, "message": message or f"{name} message"}


def test_the_diagnosis_names_the_check_that_failed_not_the_verdicts_general_words() -> None:
    from graders.verdict import Verdict
    from server.web.diagnosis import diagnose
    from server.web.views import check_views

    residuals = {"submitted_bwd_peak_bytes": 3 * 2**20, "expected_bwd_peak_bytes": 2**20}
    # sin_chain_recursive's case: the residuals check passed and the peak check failed
    checks = check_views([_check("value", True), _check("residuals", True), _check("peak_memory", False)])
    d = diagnose(Verdict.WRONG_POLICY, checks, [], residuals)
    assert d.headline == "Your backward pass needs more memory than allowed"
    assert "3.0 MiB" in d.detail and "1.0 MiB" in d.detail and "saves different" not in d.headline
    # a peak that is only reported does not fail anything
    checks = check_views([_check("residuals", True), _check("peak_memory", False, judged=False)])
    assert checks[1].state == "reported" and diagnose(Verdict.ACCEPTED, checks, [], residuals).detail == ""


def test_the_diagnosis_says_which_values_are_saved_wrongly_and_what_to_change() -> None:
    stored = json.loads((CANNED / "wrong_policy.json").read_text())
    d = panel_context(stored)["diagnosis"]
    assert d.headline == "Your checkpoint policy saves different values than the required one"
    assert "saves 1 value the required policy does not keep: f32[64,256] (maximum)" in d.detail
    assert "does not save 1 value the required policy keeps: f32[64,256] (dot_general)" in d.detail
    assert d.advice.startswith("Change what your policy saves")
    html = render_panel(stored, "abc")
    assert html.index('id="diagnosis"') < html.index('class="checks"')  # the diagnosis comes first


def test_the_diagnosis_of_a_value_kept_in_the_wrong_memory_says_so() -> None:
    from graders.verdict import Verdict
    from server.web.diagnosis import diagnose
    from server.web.views import check_views

    message = (
        "case 'large': your function saves residuals of the right shapes but keeps them in other memory than "
        "the required policy (not saved by yours: f32[1024,512] on pinned_host x1; saved by yours only: "
        "f32[1024,512] in device memory x1).\nthe required policy saves: ..."
    )
    checks = check_views([_check("value", True), _check("residuals", False, message=message)])
    d = diagnose(Verdict.WRONG_POLICY, checks, [], None)
    assert d.headline == "Your checkpoint policy saves the right values in the wrong memory"
    assert "in device memory x1" in d.detail and "the required policy saves" not in d.detail
    assert "pinned_host" in d.advice


def test_inexact_flops_are_said_and_not_drawn() -> None:
    from graders.verdict import ResidualReport, Verdict, VerdictReport
    from server.web.panel import panel_context

    residuals = ResidualReport(
        case="large",
        expected_bytes=100,
        submitted_bytes=100,
        expected_recompute_flops=10,
        submitted_recompute_flops=12,
        no_checkpoint_bytes=300,
        full_remat_bytes=10,
        full_remat_recompute_flops=40,
        flops_exact=True,
    )
    exact = panel_context(VerdictReport(problem="p", verdict=Verdict.ACCEPTED, residuals=residuals))
    assert exact["plane"] is not None and exact["flops_exact"]
    loose = panel_context(
        VerdictReport(
            problem="p", verdict=Verdict.ACCEPTED, residuals=residuals.model_copy(update={"flops_exact": False})
        )
    )
    assert loose["plane"] is None and not loose["flops_exact"]
