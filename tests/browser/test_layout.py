"""The insight and upload pages in a real browser at 390 px (a phone) and 1280 px, light and dark: the insight
page's policy column is wide enough to read, the upload report's Got and OK are on screen (or the
table says it scrolls), the upload form is laid out and styled, a refused upload is red and keeps
the chosen file, and a validated upload is published from its page. Measured in the DOM;
screenshots in test-artifacts/browser/layout-*.png.
"""

from __future__ import annotations

import colorsys
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from graders.insight import fingerprint
from graders.pipeline import JudgeConfig
from graders.problems.publication import TODO_FILES
from server.problems.packages import pack
from tests.browser.test_web import CANNED, PASSWORD, SHOTS, _csrf, _sign_in, chromium  # noqa: F401 (a fixture)
from tests.support import PROBLEMS, Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.jail]
CLI = str(Path(sys.executable).parent / "remat-judge")
ADMIN = "layout-admin@example.org"
WIDTHS = ((390, 844), (1280, 900))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, judge_config: JudgeConfig) -> Iterator[Server]:
    """A server with a problems folder of its own (uploads install there), an admin, and graded
    attempts at checkpoint_dot_policy in three policies (canned verdicts, stored as a worker does)."""
    root = tmp_path_factory.mktemp("layout")
    problems = root / "problems"
    problems.mkdir()
    shutil.copytree(PROBLEMS / "checkpoint_dot_policy", problems / "checkpoint_dot_policy")
    server = Server(
        root / "data", env={"REMAT_JUDGE_PROBLEMS_DIR": str(problems), "REMAT_JUDGE_HIDDEN_SEED": "layout-seed"}
    ).start()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        signup = {"display_name": "Layla", "email": ADMIN, "password": PASSWORD, "next": "/"}
        made = client.post("/signup", data={**signup, "csrf_token": _csrf(client.get("/signup").text)})
        assert made.status_code == 303, made.text[:500]
    promoted = subprocess.run(
        [CLI, "users", "role", ADMIN, "admin", "--data-dir", str(server.data_dir)],
        capture_output=True,
        text=True,
        env=server.env,
    )
    assert promoted.returncode == 0, promoted.stderr
    store_canned_verdicts(server)
    yield server
    server.stop()


def store_canned_verdicts(server: Server) -> None:
    from server.store.accounts import UserStore
    from server.store.db import make_engine
    from server.store.submissions import SubmissionStore

    engine = make_engine(f"sqlite:///{server.data_dir.resolve() / 'remat-judge.db'}")
    account = UserStore(engine).by_email(ADMIN)
    assert account is not None
    store = SubmissionStore(engine)
    for name in ("wrong_policy", "wrong_policy", "old_report", "accepted"):
        report = json.loads((CANNED / f"{name}.json").read_text())
        found = fingerprint(report)
        assert found is not None
        record = store.create(problem="checkpoint_dot_policy", source="# canned\n", user_id=account.id)
        assert store.claim(record.id, worker_id="canned", lease_s=600, max_attempts=1).record is not None
        assert store.finish(
            record.id,
            verdict=report["verdict"],
            score=report["score"],
            worker_id="canned",
            problem_version=report["problem_version"],
            result_json=json.dumps(report),
            policy_fingerprint=found.key,
        )


def package(tmp: Path, slug: str, *, todos: bool) -> Path:
    """`remat-judge problems new` packed as `<slug>.tar.gz` (the scaffold validates as it is; its
    TODOs written when `todos` is False)."""
    made = subprocess.run([CLI, "problems", "new", slug, "--problems-dir", str(tmp)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    if not todos:
        for name in TODO_FILES:
            path = tmp / slug / name
            path.write_text(path.read_text().replace("TODO", "Written"))
    archive = tmp / f"{slug}.tar.gz"
    archive.write_bytes(pack(tmp / slug))
    return archive


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"layout-{name}.png"), full_page=True)


def rgb(css: str) -> tuple[int, int, int]:
    found = re.match(r"rgba?\((\d+), (\d+), (\d+)", css)
    assert found, css
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def reddish(css: str) -> bool:
    """A red hue (within 20° of red), clearly saturated: the site's --bad-bg, light or dark."""
    r, g, b = rgb(css)
    hue, lightness, saturation = colorsys.rgb_to_hls(r / 255, g / 255, b / 255)
    return (hue < 20 / 360 or hue > 340 / 360) and saturation > 0.4 and r > g and r > b


def no_sideways_scroll(page: Any, what: str) -> None:
    overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"{what} scrolls sideways by {overflow}px"


def char_width(page: Any, selector: str) -> float:
    """The width of one '0' in the font of the first `selector` element."""
    return float(
        page.eval_on_selector(
            selector,
            """e => { const s = document.createElement('span'); s.textContent = '0'.repeat(20);
                      s.style.whiteSpace = 'nowrap'; e.appendChild(s); const w = s.getBoundingClientRect().width;
                      s.remove(); return w / 20; }""",
        )
    )


def test_the_insight_policy_column_is_readable_and_its_code_is_code(chromium: Any, site: Server) -> None:  # noqa: F811
    for (width, height), scheme in (*((w, "light") for w in WIDTHS), ((390, 844), "dark")):
        context = chromium.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
        page = context.new_page()
        _sign_in(page, site, ADMIN)
        page.goto(site.url + "/instructor/problems/checkpoint_dot_policy/insight")
        shot(page, f"insight-{width}-{scheme}")
        rows = page.locator("#clusters tbody tr")
        assert rows.count() == 3
        policy = page.locator("#clusters td.policy").first
        box = policy.bounding_box()
        assert box is not None
        chars = box["width"] / char_width(page, "#clusters td.policy")
        assert chars >= (30 if width < 640 else 40), f"the policy column is {chars:.0f} characters wide at {width}px"
        # the whole cell is on screen: read without scrolling sideways
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, box
        texts = page.locator("#clusters td.policy").all_inner_texts()
        assert not any("`" in t for t in texts), texts
        assert page.locator("#clusters td.policy code", has_text="dot_general").count() >= 1
        code_font = page.eval_on_selector("#clusters td.policy code", "e => getComputedStyle(e).fontFamily")
        assert "mono" in code_font.lower(), code_font
        if width < 640:  # stacked: every field labelled
            labels = page.eval_on_selector_all(
                "#clusters tbody tr:first-child td", "els => els.map(e => getComputedStyle(e, '::before').content)"
            )
            assert '"What the policy does"' in labels and '"Verdict"' in labels, labels
        no_sideways_scroll(page, f"the insight page at {width}px ({scheme})")
        context.close()


def upload_form_is_laid_out(page: Any, width: int) -> None:
    box = page.locator("#publish").bounding_box()
    label = page.locator("label.check-row span").bounding_box()
    assert box and label
    # the box and its words on one row: the box beside the first line, not above it
    assert box["x"] + box["width"] <= label["x"] + 1, (box, label)
    assert box["y"] < label["y"] + 24 and label["y"] < box["y"] + box["height"], (box, label)
    button = page.locator("#upload-form button[type=submit]")
    styles = button.evaluate(
        "e => { const s = getComputedStyle(e); return [s.backgroundColor, s.color, s.borderRadius, s.fontWeight]; }"
    )
    assert styles[0] in ("rgb(53, 89, 214)", "rgb(142, 166, 255)"), styles  # the site's accent, light or dark
    assert styles[2] != "0px" and int(styles[3]) >= 600, styles
    field = page.locator("#package").bounding_box()
    assert field and field["x"] + field["width"] <= width, field
    no_sideways_scroll(page, f"the upload form at {width}px")


def refused_and_kept(page: Any, archive: Path, expected: str) -> None:
    """The red error box, and the file still chosen in the form."""
    error = page.locator("#upload-error")
    error.wait_for(timeout=30_000)
    assert expected in error.inner_text(), error.inner_text()
    background, border = error.evaluate(
        "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).borderLeftColor]"
    )
    assert reddish(background) and reddish(border), (background, border)
    assert page.eval_on_selector("#package", "e => e.files.length ? e.files[0].name : null") == archive.name


def wait_for_report(page: Any) -> str:
    page.wait_for_url(re.compile(r".*/instructor/problems/uploads/[0-9a-f]{32}$"), timeout=30_000)
    upload_url = page.url
    deadline = time.monotonic() + 600
    while "Validating" in page.locator("#upload-state").inner_text():
        assert time.monotonic() < deadline, "validation did not end"
        page.wait_for_timeout(1000)
        page.reload()
    return upload_url


def validation_cells_reachable(page: Any, width: int) -> None:
    """Got and OK of every row are on screen, or the table says it scrolls sideways."""
    table_box = page.locator(".table-scroll").first
    overflows = table_box.evaluate("e => e.scrollWidth > e.clientWidth + 1")
    if overflows:
        hint = page.locator("p.scroll-hint").first
        assert hint.is_visible() and "scroll" in hint.inner_text()
        assert table_box.get_attribute("tabindex") == "0"  # reachable by keyboard too
    else:
        assert page.locator("p.scroll-hint:visible").count() == 0
        for cell in ("td.got", "td.ok"):
            for box in page.locator(f"#validation-rows {cell}").evaluate_all(
                "els => els.map(e => e.getBoundingClientRect().toJSON())"
            ):
                assert box["width"] > 0 and box["right"] <= width + 1, (cell, box, width)
    oks = page.locator("#validation-rows td.ok").all_inner_texts()
    assert oks and all("ok" in t for t in oks), oks
    no_sideways_scroll(page, f"the upload report at {width}px")


def test_upload_form_errors_keep_the_file_and_a_validated_upload_is_published(
    chromium: Any,  # noqa: F811
    site: Server,
    tmp_path: Path,
) -> None:
    with_todos = package(tmp_path, "layout_todo", todos=True)
    finished = package(tmp_path, "layout_done", todos=False)
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a gzip archive")
    reports = {}

    # a phone: publish with a TODO left is refused in red, the file stays chosen; unticking publish
    # and sending again (no new pick) starts validation
    phone = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = phone.new_page()
    _sign_in(page, site, ADMIN)
    page.goto(site.url + "/instructor/problems/upload")
    upload_form_is_laid_out(page, 390)
    shot(page, "upload-form-390")
    page.set_input_files("#package", str(with_todos))
    page.check("#publish")
    page.click("#upload-form button[type=submit]")
    refused_and_kept(page, with_todos, "TODO")
    assert page.is_checked("#publish")
    shot(page, "upload-error-390")
    page.uncheck("#publish")
    page.click("#upload-form button[type=submit]")
    reports["todo"] = wait_for_report(page)
    phone.close()

    # a desktop: a file that is no archive is refused, kept; then the finished package
    desktop = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = desktop.new_page()
    _sign_in(page, site, ADMIN)
    page.goto(site.url + "/instructor/problems/upload")
    upload_form_is_laid_out(page, 1280)
    page.set_input_files("#package", str(broken))
    page.click("#upload-form button[type=submit]")
    refused_and_kept(page, broken, "bad package archive")
    shot(page, "upload-error-1280")
    page.set_input_files("#package", str(finished))
    page.click("#upload-form button[type=submit]")
    reports["done"] = wait_for_report(page)
    desktop.close()

    for (width, height), scheme in (*((w, "light") for w in WIDTHS), ((390, 844), "dark")):
        context = chromium.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
        page = context.new_page()
        _sign_in(page, site, ADMIN)
        if scheme == "dark":
            page.goto(site.url + "/instructor/problems/upload")
            page.set_input_files("#package", str(with_todos))
            page.check("#publish")
            page.click("#upload-form button[type=submit]")
            refused_and_kept(page, with_todos, "TODO")
            upload_form_is_laid_out(page, width)
            shot(page, f"upload-error-{width}-dark")
        for name, url in reports.items():
            page.goto(url)
            assert "Installed" in page.locator("#upload-state").inner_text()
            validation_cells_reachable(page, width)
            if name == "todo":
                assert page.locator("#publish-button").count() == 0
                assert "TODO" in page.locator("#publish-state").inner_text()
            shot(page, f"upload-report-{name}-{width}-{scheme}")
        context.close()

    # between the two: a tablet, where the 9 columns no longer fit and the table scrolls, saying so
    tablet = chromium.new_context(viewport={"width": 760, "height": 900})
    page = tablet.new_page()
    _sign_in(page, site, ADMIN)
    page.goto(reports["done"])
    validation_cells_reachable(page, 760)
    box = page.locator(".table-scroll").first
    assert box.evaluate("e => e.scrollWidth > e.clientWidth + 1"), "the 9 columns fit at 760px: test another width"
    shadow = box.evaluate("e => getComputedStyle(e).backgroundImage")
    assert shadow.count("gradient") == 4, shadow  # the edge shadows, drawn without JavaScript too
    shot(page, "upload-report-scrolls-760")
    box.evaluate("e => { e.scrollLeft = e.scrollWidth; }")  # at the end: nothing more to the right
    page.wait_for_function("!document.querySelector('p.scroll-hint').checkVisibility()")
    ok = page.locator("#validation-rows td.ok").first.bounding_box()
    assert ok and ok["x"] + ok["width"] <= 760, ok
    tablet.close()

    # publish the finished one from its page: students (and the API without a token) then see it
    assert "layout_done" not in [p["slug"] for p in httpx.get(site.url + "/api/v1/problems").json()]
    desktop = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = desktop.new_page()
    _sign_in(page, site, ADMIN)
    page.goto(reports["done"])
    button = page.locator("#publish-button")
    version = re.search(r"version (\w+)", button.inner_text()).group(1)  # type: ignore[union-attr]
    button.click()
    page.wait_for_url(reports["done"])
    assert "Published: students" in page.locator("#publish-state").inner_text()
    assert "Installed and published" in page.locator("#upload-state").inner_text()
    assert page.locator("#publish-button").count() == 0
    shot(page, "upload-published-1280")
    listed = {p["slug"]: p for p in httpx.get(site.url + "/api/v1/problems").json()}
    assert listed["layout_done"]["version"] == version and listed["layout_done"]["published"] is True
    page.goto(site.url + "/")
    row = page.locator("table.problems tr", has=page.locator("a[href='/problems/layout_done']"))
    assert row.count() == 1 and "unpublished" not in row.inner_text()
    todo_row = page.locator("table.problems tr", has=page.locator("a[href='/problems/layout_todo']"))
    assert "unpublished" in todo_row.inner_text()
    desktop.close()
