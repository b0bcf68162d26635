"""The web judge in a real browser: Playwright for Python driving Debian's Chromium against a real
server on loopback. Screenshots of every page go to test-artifacts/browser/.

Outside CI these tests skip (saying why) only when no Chromium can be had; in CI (CI=1) a missing
Chromium fails them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig
from tests.support import CHROMIUM_ARGS, PROBLEMS, REPO, Server, chromium_path

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.jail]
SHOTS = REPO / "test-artifacts" / "browser"
PASSWORD = "correct horse battery"

NO_POLICY = """import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    return jax.checkpoint(pipeline)(w1, w2, x)
"""
WITH_POLICY = NO_POLICY.replace(
    "jax.checkpoint(pipeline)",
    "jax.checkpoint(pipeline, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, judge_config: JudgeConfig) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("web-data")).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """Debian's Chromium under Playwright (each launch gets a fresh temporary profile)."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def browser(chromium: object) -> Iterator[object]:
    """One desktop-sized browser context shared by the tests of this module (one cookie jar)."""
    context = chromium.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    yield context
    context.close()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


@pytest.fixture(scope="module")
def ada(server: Server) -> dict[str, str]:
    """Ada's account with two graded attempts at checkpoint_dot_policy, made over plain HTTP
    through the same forms the pages post (so every test that needs them gets them, in any
    order): one without a policy (WRONG_POLICY), then the fix (ACCEPTED). Returns the paths of
    both verdict pages ("wrong", "accepted")."""
    import httpx

    with httpx.Client(base_url=server.url, timeout=120) as client:
        signup = {"display_name": "Ada", "email": "ada@example.org", "password": PASSWORD, "next": "/"}
        made = client.post("/signup", data={**signup, "csrf_token": _csrf(client.get("/signup").text)})
        assert made.status_code == 303, made.text[:500]
        token = _csrf(client.get("/problems/checkpoint_dot_policy").text)
        paths = {}
        for name, source in (("wrong", NO_POLICY), ("accepted", WITH_POLICY)):
            answer = client.post(
                "/problems/checkpoint_dot_policy/submit",
                data={"source": source, "csrf_token": token},
                headers={"Accept": "application/json"},
            )
            assert answer.status_code == 201, answer.text[:500]
            body = answer.json()
            deadline = time.monotonic() + 300
            while (status := client.get(body["status_url"]).json())["status"] not in ("done", "failed"):
                assert time.monotonic() < deadline, status
                time.sleep(0.3)
            assert status["verdict"] == ("WRONG_POLICY" if name == "wrong" else "ACCEPTED"), status
            paths[name] = body["page_url"]
    return paths


@pytest.fixture(scope="module")
def admin(server: Server, ada: dict[str, str]) -> str:
    """Ada made a site admin with the CLI (`remat-judge users role EMAIL admin`); her email."""
    cli = str(Path(sys.executable).parent / "remat-judge")
    promoted = subprocess.run(
        [cli, "users", "role", "ada@example.org", "admin", "--data-dir", str(server.data_dir)],
        capture_output=True,
        text=True,
        env=server.env,
    )
    assert promoted.returncode == 0, promoted.stderr
    return "ada@example.org"


def shot(page: object, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def replace_editor_text(page: object, text: str) -> None:
    """Selects everything in the CodeMirror editor and types `text` (inserted as one paste-like
    input, so the editor's auto-indent does not re-indent it)."""
    page.click(".cm-content")  # type: ignore[attr-defined]
    page.keyboard.press("Control+A")  # type: ignore[attr-defined]
    page.keyboard.press("Delete")  # type: ignore[attr-defined]
    page.keyboard.insert_text(text)  # type: ignore[attr-defined]


def submit_and_wait(page: object) -> str:
    page.click("#submit-button")  # type: ignore[attr-defined]
    page.wait_for_selector("#live-status[data-status=done]", timeout=120_000)  # type: ignore[attr-defined]
    return page.get_attribute("#live-status", "data-verdict")  # type: ignore[attr-defined]


def test_a_new_user_solves_a_problem_and_understands_why_an_attempt_was_wrong(chromium: object, server: Server) -> None:
    context = chromium.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()  # a browser of her own: signed out whatever ran before
    page.goto(server.url + "/")
    assert page.locator("table.problems tbody tr").count() >= 13
    shot(page, "01-problem-list")

    page.click("text=Sign up")
    page.fill("input[name=display_name]", "Grace")
    page.fill("input[name=email]", "grace@example.org")
    page.fill("input[name=password]", PASSWORD)
    shot(page, "02-sign-up")
    page.click("main button[type=submit]")
    page.wait_for_url(server.url + "/")
    assert page.locator(".who").inner_text() == "Grace"

    page.goto(server.url + "/problems/checkpoint_dot_policy")
    page.wait_for_selector(".cm-editor")
    assert page.locator("#statement h2").first.inner_text() == "The task"  # the task first
    assert "checkpoint_dot_policy(w1, w2, x)" in page.locator("#task").inner_text()
    assert page.locator("#statement h2").nth(1).inner_text() == "Why the policy matters"
    assert page.locator(".katex").count() > 0  # the statement's math is rendered
    assert not page.locator("#source").is_visible()  # the editor replaced the textarea
    shot(page, "03-problem-page")

    # an attempt without a policy: right values and gradients, wrong residuals
    replace_editor_text(page, NO_POLICY)
    assert submit_and_wait(page) == "WRONG_POLICY"
    panel = page.locator("#verdict-panel .verdict-panel")
    assert panel.get_attribute("data-verdict") == "WRONG_POLICY"
    assert "saves different residuals" in panel.inner_text()
    # 2 dot outputs the reference saves and this attempt does not: one row each, marked
    assert page.locator("#residual-table tr.only-reference").count() >= 2
    assert page.locator("#residual-table tr.only-reference td.saved").nth(1).inner_text() == "not saved"
    bars = page.locator("#memory-chart svg rect.bar")
    assert bars.count() == 6  # yours, reference, no checkpoint; residual bytes and backward peak
    assert page.locator("#memory-chart .bar.plain").count() == 2
    panel.scroll_into_view_if_needed()
    permalink = panel.locator("a.permalink").get_attribute("href")
    assert_panel_shows_the_report(page, server, permalink.rsplit("/", 1)[-1])
    shot(page, "04-wrong-policy")
    panel.screenshot(path=str(SHOTS / "04b-wrong-policy-panel.png"))
    # without a reload: the attempt is in the history, and the first hint opened
    page.wait_for_function("document.querySelectorAll('#history tbody tr').length === 1")
    page.wait_for_selector("#hints details.hint-item")
    assert "1 of" in page.locator("#hints h2").inner_text()

    # the fix: the policy that saves the matmul outputs
    replace_editor_text(page, WITH_POLICY)
    assert submit_and_wait(page) == "ACCEPTED"
    assert page.locator("#residual-table tr.differs").count() == 0
    assert page.locator("#verdict-panel .verdict-panel.accepted").count() == 1
    assert_panel_shows_the_report(
        page, server, page.locator("#verdict-panel a.permalink").get_attribute("href").rsplit("/", 1)[-1]
    )
    shot(page, "05-accepted")
    page.locator("#verdict-panel .verdict-panel").screenshot(path=str(SHOTS / "05b-accepted-panel.png"))

    # solved, live: the badge, two rows of history, every hint open
    page.wait_for_selector(".problem-meta .solved-badge")
    assert page.locator("#history tbody tr").count() == 2
    total = page.locator("#hints h2").inner_text()
    assert re.search(r"(\d+) of \1 open", total), total
    # a past submission back into the editor, undoable
    page.locator("#history a[data-load-source]").nth(1).click()  # the older one: no policy
    page.wait_for_function("window.rematEditor.state.doc.toString().includes('jax.checkpoint(pipeline)(w1')")
    page.keyboard.press("Control+Z")
    assert "dots_with_no_batch_dims_saveable" in page.evaluate("window.rematEditor.state.doc.toString()")
    assert (
        "ago" in page.locator("#history time").first.inner_text()
        or "now" in page.locator("#history time").first.inner_text()
    )
    page.click("#hints a[href='/problems/checkpoint_dot_policy/solution']")
    solution = page.locator("#reference-solution").inner_text()
    assert "dots_with_no_batch_dims_saveable" in solution and "Never served" not in solution
    shot(page, "06-solution")

    page.goto(server.url + "/")
    row = page.locator("table.problems tr", has=page.locator("a[href='/problems/checkpoint_dot_policy']"))
    assert row.locator(".tick").count() == 1
    page.goto(server.url + "/me")
    assert page.locator("table.history tbody tr").count() == 2
    shot(page, "07-history")
    context.close()


def stored_report(server: Server, submission_id: str) -> dict:
    """The verdict JSON as the server stored it (every field the verifier wrote)."""
    from server.store.db import make_engine
    from server.store.submissions import SubmissionStore

    engine = make_engine(f"sqlite:///{server.data_dir.resolve() / 'remat-judge.db'}")
    record = SubmissionStore(engine).get(submission_id)
    assert record is not None and record.result_json
    return json.loads(record.result_json)


def assert_panel_shows_the_report(page: object, server: Server, submission_id: str) -> None:
    """The live panel against the stored verdict JSON: checks that were only reported get no tick,
    and the plane has a point for each side whose numbers the verifier wrote."""
    report = stored_report(server, submission_id)
    panel = page.locator("#verdict-panel .verdict-panel")  # type: ignore[attr-defined]
    for check in report["checks"]:
        item = panel.locator(f".check[data-check={check['name']}]")
        state = "reported" if check.get("judged") is False else "pass" if check["passed"] else "fail"
        assert item.get_attribute("class") == f"check {state}", check["name"]
        if state == "reported":
            assert "✓" not in item.inner_text()
    res = report["residuals"]
    drawn = {
        "yours": ("submitted_bytes", "submitted_recompute_flops"),
        "reference": ("expected_bytes", "expected_recompute_flops"),
        "plain": ("no_checkpoint_bytes", "no_checkpoint_bytes"),
        "remat": ("full_remat_bytes", "full_remat_recompute_flops"),
    }
    expected = {k for k, fields in drawn.items() if all(res.get(f) is not None for f in fields)}
    shown = set(panel.locator("#plane-chart [data-point]").evaluate_all("els => els.map(e => e.dataset.point)"))
    assert shown == (expected if len(expected) >= 2 else set())
    has_line = res.get("submitted_recompute_flops") is not None and res.get("expected_recompute_flops") is not None
    assert panel.locator("#recompute-line").count() == int(has_line)


CANNED = REPO / "web" / "dev" / "verdicts"


def test_the_panel_plots_memory_against_recomputation_on_desktop_and_phone(
    chromium: object, server: Server, ada: dict[str, str]
) -> None:
    """Canned verdicts (web/dev/verdicts/: the new fields, an ACCEPTED one, and a report stored
    before those fields existed) stored as Ada's submissions and viewed on their pages: desktop and
    phone, with and without JavaScript."""
    from server.store.accounts import UserStore
    from server.store.db import make_engine
    from server.store.submissions import SubmissionStore

    engine = make_engine(f"sqlite:///{server.data_dir.resolve() / 'remat-judge.db'}")
    account = UserStore(engine).by_email("ada@example.org")
    assert account is not None
    store = SubmissionStore(engine)
    ids = {}
    for name in ("wrong_policy", "accepted", "old_report", "mesh_wrong_policy", "budget_accepted"):
        report = json.loads((CANNED / f"{name}.json").read_text())
        # under another problem than the one whose verdict counts a later test checks
        record = store.create(problem="remat_sin_sin", source="# canned\n", user_id=account.id)
        # stored as a worker stores a verdict: claimed first (so the server's grading threads leave it)
        assert store.claim(record.id, worker_id="canned", lease_s=600, max_attempts=1).record is not None
        assert store.finish(
            record.id,
            verdict=report["verdict"],
            score=report["score"],
            worker_id="canned",
            problem_version=report["problem_version"],
            result_json=json.dumps(report),
        )
        ids[name] = record.id
    for label, options in (
        ("desktop", {"viewport": {"width": 1280, "height": 900}}),
        ("phone", {"viewport": {"width": 390, "height": 844}, "is_mobile": True}),
        ("no-js", {"viewport": {"width": 390, "height": 844}, "java_script_enabled": False}),
    ):
        context = chromium.new_context(**options)  # type: ignore[attr-defined]
        page = context.new_page()
        _sign_in(page, server, "ada@example.org")
        for name, submission_id in ids.items():
            page.goto(f"{server.url}/submissions/{submission_id}")
            chart = page.locator("#plane-chart")
            if name == "old_report":
                assert chart.count() == 0 and page.locator(".check.reported").count() == 0
                assert page.locator("#residual-table").get_attribute("data-compared") == "shapes"
            else:
                points = chart.locator("[data-point]")
                assert points.count() == 4
                labels = " ".join(chart.locator(".point-label").all_text_contents())
                for word in ("yours", "reference", "no", "checkpoint", "everything", "recomputed"):
                    assert word in labels, (word, labels)
                assert "bytes" in chart.inner_text() and "FLOPs" in chart.inner_text()
                sizes = chart.locator("svg.plane-svg text").evaluate_all(
                    "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))"
                )
                assert min(sizes) >= 11, sizes
                box = chart.locator("svg.plane-svg").bounding_box()
                assert box["width"] > 150 and box["x"] >= 0, box
                for p in range(points.count()):
                    dot = points.nth(p).locator("circle").bounding_box()
                    assert box["x"] - 10 <= dot["x"] <= box["x"] + box["width"], (name, dot, box)
                reported = page.locator(".check.reported")
                assert reported.count() == 1 and "✓" not in reported.inner_text()
                compared = "budget" if name == "budget_accepted" else "values"
                assert page.locator("#residual-table").get_attribute("data-compared") == compared
            if name == "wrong_policy":
                assert page.locator("#residual-table tr.only-reference").count() == 1
                assert page.locator("#residual-table tr.only-yours").count() == 1
                assert "the reference’s recomputes 16.4 k FLOPs" in page.locator("#recompute-line").inner_text()
            if name == "mesh_wrong_policy":
                # fsdp_regather with everything_saveable: the gathered weights kept whole on every device
                table = page.locator("#residual-table")
                assert "piece per device" in table.locator("thead").inner_text()
                assert table.locator(".placement", has_text="replicated on 4 devices").count() == 3
                assert table.locator("tr.only-yours").count() >= 3
                comm = page.locator("#communication-chart")
                assert comm.locator("[data-point]").count() == 4
                assert "bytes received per device" in comm.inner_text()
                line = page.locator("#communication-line").inner_text()
                assert "142.5 KiB" in line and "3 all-gather, 3 reduce-scatter" in line, line
                assert "memory_analysis()" in page.locator("#xla-memory").inner_text()
            else:
                assert page.locator("#communication-chart").count() == 0
            if name == "budget_accepted":
                # budget_uneven_chain, two of the four narrow values kept: the frontier and the budget drawn
                assert chart.locator("line.frontier").count() >= 10
                assert chart.locator("line.budget").count() == 1
                assert "the least any policy recomputes" in chart.inner_text()
                assert "Policy score 0.760" in page.locator(".check[data-check=recompute]").inner_text()
                optimum = page.locator("#optimum-values")
                assert "8.45 M" in optimum.inner_text() and "tanh f32[64,64]" in optimum.inner_text()
                assert optimum.locator("li.missing").count() == 1  # the four narrow values it keeps
            else:
                assert page.locator("line.frontier").count() == 0
            overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{name} scrolls sideways by {overflow}px ({label})"
            page.locator(".verdict-panel").screenshot(path=str(SHOTS / f"11-plane-{name}-{label}.png"))
        context.close()


def test_the_draft_survives_a_reload(browser: object, server: Server, ada: dict[str, str]) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    _sign_in(page, server, "ada@example.org")
    page.goto(server.url + "/problems/remat_sin_sin")
    page.wait_for_selector(".cm-editor")
    replace_editor_text(page, "# my draft\n")
    page.wait_for_timeout(600)  # the draft is saved after a short pause
    page.reload()
    page.wait_for_selector(".cm-editor")
    assert page.locator("#draft-note").is_visible()
    assert "# my draft" in page.locator(".cm-content").inner_text()
    page.click("#reset-starter")
    assert "raise NotImplementedError" in page.locator(".cm-content").inner_text()
    page.close()


def test_locked_until_solved_and_private_to_the_author(browser: object, server: Server, ada: dict[str, str]) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(server.url + "/signup")
    page.fill("input[name=display_name]", "Bob")
    page.fill("input[name=email]", "bob@example.org")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(server.url + "/")
    response = page.goto(server.url + "/problems/checkpoint_dot_policy/solution")
    assert response.status == 403
    assert "open after your first ACCEPTED" in page.inner_text("main")
    # Ada's submissions are not Bob's to see
    assert page.goto(server.url + ada["wrong"]).status == 404
    assert page.context.request.get(server.url + ada["wrong"] + "/panel").status == 404
    page.close()


def test_instructor_sees_every_submission_and_verdict_counts(browser: object, server: Server, admin: str) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    _sign_in(page, server, "ada@example.org")
    page.goto(server.url + "/instructor")
    assert page.locator("table.history tbody tr").count() >= 2
    page.click("a[href='/instructor/problems/checkpoint_dot_policy']")
    counts = page.locator("#verdict-counts").inner_text()
    for verdict in ("ACCEPTED", "WRONG_POLICY"):  # Ada's two attempts at least (other tests may add theirs)
        found = re.search(verdict + r"\s+(\d+)", counts)
        assert found and int(found.group(1)) >= 1, counts
    shot(page, "08-instructor-problem")
    page.close()


def test_instructor_makes_an_api_client_sees_its_key_once_and_revokes_it(
    browser: object, server: Server, admin: str
) -> None:
    """Ada, an admin, makes a client. The key works against the API until revoked from the same
    page."""
    import httpx

    page = browser.new_page()  # type: ignore[attr-defined]
    _sign_in(page, server, "ada@example.org")
    page.goto(server.url + "/instructor")
    page.click("a[href='/instructor/clients']")
    page.fill("input[name=name]", "course-lms")
    page.fill("input[name=problems]", "remat_sin_sin")
    page.fill("textarea[name=callback_allow]", "https://lms.example.org/hooks/")
    page.click("form.client-form button[type=submit]")
    created = json.loads(page.locator("#created-client-json").inner_text())
    assert set(created) == {"client_id", "api_key", "callback_secret"} and created["client_id"] == "course-lms"
    shot(page, "09-api-client-created")
    row = page.locator("table.clients tr", has_text="course-lms")
    assert "remat_sin_sin" in row.inner_text() and created["api_key"] not in page.locator("table.clients").inner_text()
    headers = {"Authorization": f"Bearer {created['api_key']}"}
    scoped = httpx.post(
        server.url + "/api/v1/submissions",
        headers=headers,
        json={"problem": "checkpoint_dot_policy", "source": "x = 1\n"},
    )
    assert scoped.status_code == 403
    page.goto(server.url + "/instructor/clients")  # a reload shows the key no more
    assert page.locator("#created-client-json").count() == 0
    page.locator("table.clients tr", has_text="course-lms").locator("button", has_text="Revoke").click()
    page.wait_for_url(server.url + "/instructor/clients")
    assert "revoked" in page.locator("table.clients tr", has_text="course-lms").inner_text()
    revoked = httpx.post(
        server.url + "/api/v1/submissions", headers=headers, json={"problem": "remat_sin_sin", "source": "x = 1\n"}
    )
    assert revoked.status_code == 401
    shot(page, "10-api-client-revoked")
    page.close()


def test_instructor_runs_a_course_with_a_gradebook_and_regrades_a_problem(
    chromium: object, server: Server, admin: str
) -> None:
    """Ada, an admin who solved checkpoint_dot_policy after a WRONG_POLICY (the fixtures): a
    course with a deadline, her own enrollment as a student, the gradebook and its CSV at 1280 px
    and 390 px, then a regrade of the problem from its page, with nothing changed."""
    for width, height in ((1280, 900), (390, 844)):
        context = chromium.new_context(
            viewport={"width": width, "height": height},  # type: ignore[attr-defined]
            accept_downloads=True,
        )
        page = context.new_page()
        _sign_in(page, server, "ada@example.org")
        page.goto(server.url + "/instructor")
        page.click("a[href='/instructor/courses']")
        key = f"rm-{width}"
        page.fill("input[name=key]", key)
        page.fill("input[name=title]", f"Remat {width}")
        page.click("form.client-form button[type=submit]")
        page.wait_for_url(f"{server.url}/instructor/courses/{key}")
        new = page.locator("form[aria-label='new assignment']")
        new.locator("select[name=problem]").select_option("checkpoint_dot_policy")
        new.locator("input[name=due_at]").fill("2099-01-01T12:00")
        # her attempts came first: an assignment opened now would not count them (README)
        new.locator("input[name=opens_at]").fill("2020-01-01T00:00")
        new.locator("button[type=submit]").click()
        page.wait_for_url(f"{server.url}/instructor/courses/{key}")
        enroll = page.locator("form[aria-label='enroll']")
        enroll.locator("input[name=email]").fill("ada@example.org")
        enroll.locator("button[type=submit]").click()
        page.wait_for_url(f"{server.url}/instructor/courses/{key}")
        cell = page.locator("#gradebook td[data-problem=checkpoint_dot_policy]").inner_text()
        assert cell.startswith("1.00 (2)") and "late" not in cell, cell
        overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
        wide = page.evaluate("""() => [...document.querySelectorAll('main *')].filter(e =>
            e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.table-scroll'))
            .map(e => e.tagName + '.' + e.className).slice(0, 8)""")
        assert overflow <= 1, f"the course page scrolls sideways by {overflow}px at {width}px: {wide}"
        shot(page, f"12-course-gradebook-{width}")
        with page.expect_download() as download:
            page.click(f"a[href='/instructor/courses/{key}/gradebook.csv']")
        text = Path(download.value.path()).read_text()
        assert text.startswith("email,name,problem,score") and "ada@example.org" in text and ",1.0000,2," in text
        context.close()

    page = chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    _sign_in(page, server, "ada@example.org")
    page.goto(server.url + "/instructor/problems/checkpoint_dot_policy")
    page.click("form.regrade-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/instructor/regrades/\d+$"))
    page.wait_for_function(
        r"/(\d+) of \1 submissions graded again/.test("
        "document.querySelector('#regrade-progress').textContent)",
        timeout=180_000,
    )
    assert "0 changed" in page.inner_text("#regrade-progress")
    shot(page, "13-regrade-done")
    page.close()


AXE = REPO / "web" / "node_modules" / "axe-core" / "axe.min.js"


def axe_violations(page: object) -> list[str]:
    """Serious and critical axe-core violations on the page as it is (WCAG 2.1 A and AA rules)."""
    page.add_script_tag(path=str(AXE))  # type: ignore[attr-defined]
    found = page.evaluate("""async () => {  // type: ignore
        const tags = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];
        const r = await axe.run(document, {runOnly: {type: "tag", values: tags}});
        return r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => v.id + ": " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "));
    }""")  # type: ignore[attr-defined]
    return list(found)


def test_axe_finds_no_serious_violations_on_the_main_pages(
    chromium: object, server: Server, admin: str, ada: dict[str, str]
) -> None:
    """Every main page, signed out and as Ada (an admin with two verdicts), with a course of her
    own that has an assignment and her as a student (made with the CLI)."""
    if not AXE.exists():
        reason = "no axe-core (make installs web/'s npm packages)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    cli = str(Path(sys.executable).parent / "remat-judge")
    for command in (
        ["courses", "create", "axe-course", "--title", "Accessible course"],
        ["courses", "assign", "axe-course", "checkpoint_dot_policy"],
        ["courses", "enroll", "axe-course", admin],
    ):
        made = subprocess.run(
            [cli, *command, "--data-dir", str(server.data_dir)], capture_output=True, text=True, env=server.env
        )
        assert made.returncode == 0 or "exists" in made.stderr, made.stderr
    found: dict[str, list[str]] = {}
    for width, height in ((1280, 900), (390, 844)):
        context = chromium.new_context(viewport={"width": width, "height": height})  # type: ignore[attr-defined]
        page = context.new_page()
        for path in ("/", "/signin", "/problems/remat_sin_sin"):
            page.goto(server.url + path)
            if violations := axe_violations(page):
                found[f"{path} at {width}px (signed out)"] = violations
        _sign_in(page, server, "ada@example.org")
        for path in (
            "/",
            "/problems/checkpoint_dot_policy",
            ada["wrong"],
            "/me",
            "/account/sessions",
            "/instructor",
            "/instructor/problems/checkpoint_dot_policy",
            "/instructor/courses/axe-course",
        ):
            page.goto(server.url + path)
            page.wait_for_load_state("networkidle")
            if violations := axe_violations(page):
                found[f"{path} at {width}px"] = violations
        context.close()
    assert found == {}, json.dumps(found, indent=1)


def test_phone_sized_screen_and_no_javascript(chromium: object, server: Server, ada: dict[str, str]) -> None:
    phone = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)  # type: ignore[attr-defined]
    page = phone.new_page()
    for path in ("/", "/problems/checkpoint_dot_policy", "/problems/scan_layers_remat", "/signin"):
        page.goto(server.url + path)
        overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} scrolls sideways by {overflow}px on a phone"
    page.goto(server.url + "/problems/checkpoint_dot_policy")
    shot(page, "09-phone")
    _sign_in(page, server, "ada@example.org")  # signed in: hints, history, the verdict page, sessions
    for path in (
        "/problems/checkpoint_dot_policy",
        ada["wrong"],
        "/account/sessions",
        "/me",
        "/instructor/problems/checkpoint_dot_policy",
    ):
        page.goto(server.url + path)
        overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} scrolls sideways by {overflow}px on a phone (signed in)"
    page.goto(server.url + "/problems/checkpoint_dot_policy")
    assert page.locator("#hints details.hint-item").count() >= 1 and page.locator("#history tbody tr").count() == 2
    page.locator("#hints").scroll_into_view_if_needed()
    shot(page, "09b-phone-hints-history")
    phone.close()

    no_js = chromium.new_context(java_script_enabled=False)  # type: ignore[attr-defined]
    page = no_js.new_page()
    page.goto(server.url + "/problems/checkpoint_dot_policy")
    text = page.inner_text("#statement")
    assert "Why the policy matters" in text and "dots_with_no_batch_dims_saveable" in text
    assert "\\sum" in text  # the TeX stays readable as text
    assert page.locator(".katex").count() == 0
    shot(page, "10-no-javascript")
    no_js.close()


def test_forms_need_the_csrf_token(browser: object, server: Server, ada: dict[str, str]) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    _sign_in(page, server, "ada@example.org")
    forged = page.context.request.post(
        server.url + "/problems/checkpoint_dot_policy/submit",
        form={"source": WITH_POLICY, "csrf_token": "not-the-token"},
    )
    assert forged.status == 403
    cookie = next(c for c in page.context.cookies() if c["name"] == "remat_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    page.close()


def _sign_in(page: object, server: Server, email: str) -> None:
    """Signs in as `email` (signing out whoever this browser context is signed in as)."""
    page.goto(server.url + "/signin")  # type: ignore[attr-defined]
    who = page.locator(".who")  # type: ignore[attr-defined]
    if who.count():
        if who.get_attribute("title") == email:
            return
        page.click("text=Sign out")  # type: ignore[attr-defined]
        page.goto(server.url + "/signin")  # type: ignore[attr-defined]
    page.fill("input[name=email]", email)  # type: ignore[attr-defined]
    page.fill("input[name=password]", PASSWORD)  # type: ignore[attr-defined]
    page.click("main button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url(server.url + "/")  # type: ignore[attr-defined]


FRAMEWORK_FILES = {
    # a linen nn.remat(nn.scan(...)): the scan's stacked carries are not kept
    "linen": ("linen_scan_remat", PROBLEMS / "linen_scan_remat" / "wrong" / "remat_outside_scan.py", "WRONG_POLICY"),
    # an Equinox filter_checkpoint as the body of a lax.scan over a stacked module
    "equinox": (
        "equinox_scan_checkpoint",
        PROBLEMS / "equinox_scan_checkpoint" / "right" / "checkpointed_apply_on_module.py",
        "ACCEPTED",
    ),
}


def test_framework_submissions_through_the_api_and_the_page_name_parameter_leaves(
    chromium: object, server: Server
) -> None:
    """A linen and an Equinox submission, graded through the REST API and then on the problem page
    in Chromium: the verdict is the file's, and residuals are named by their parameter's key path."""
    import httpx

    with httpx.Client(base_url=server.url, timeout=300) as client:
        for slug, path, verdict in FRAMEWORK_FILES.values():
            answer = client.post(
                "/api/v1/submissions", params={"wait": "true"}, json={"problem": slug, "source": path.read_text()}
            )
            assert answer.status_code == 200, answer.text[:500]
            body = answer.json()
            assert body["verdict"] == verdict, [c["message"] for c in body["checks"] if not c["passed"]]
            assert "params['" in json.dumps(body["residuals"]), "residuals are not named by their leaf's path"
            arguments = client.get(f"/api/v1/problems/{slug}").json()["arguments"]
            assert arguments[0]["kind"] == "dict" and arguments[0]["name"] == "params", arguments

    context = chromium.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(server.url + "/signup")
    page.fill("input[name=display_name]", "Linus")
    page.fill("input[name=email]", "linus@example.org")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(server.url + "/")
    for name, (slug, path, verdict) in FRAMEWORK_FILES.items():
        page.goto(f"{server.url}/problems/{slug}")
        page.wait_for_selector(".cm-editor")
        replace_editor_text(page, path.read_text())
        assert submit_and_wait(page) == verdict
        table = page.locator("#residual-table").inner_text()
        assert "params['" in table, table[:800]
        shot(page, f"20-framework-{name}")
    context.close()
