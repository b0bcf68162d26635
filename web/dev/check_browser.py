"""End-to-end check of the built front-end in a real (Debian) Chromium, driven by Playwright.

    cd web && npm ci && npm run build
    /work/main/.venv/bin/python web/dev/check_browser.py

Needs `chromium` on PATH (apt-get install chromium) and the `playwright` Python package; it never
downloads a browser. Starts web/dev/mock_server.py on a free loopback port, checks the editor, the
draft, the live submission status, the error paths, KaTeX, the verdict panel of the canned verdicts
(web/dev/verdicts/, desktop and phone) and the no-JS fallback, and saves
screenshots to /tmp/web-check/. Exits non-zero on the first failed check.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mock_server

SHOTS = Path("/tmp/web-check")
DRAFT_KEY = "remat-judge:draft:demo"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

passed: list[str] = []


def ok(what: str) -> None:
    passed.append(what)
    print(f"  ok  {what}")


def textarea_value(page: Page) -> str:
    return page.eval_on_selector("#source", "el => el.value")


def editor_text(page: Page) -> str:
    return page.evaluate("() => window.rematEditor.state.doc.toString()")


def draft(page: Page):
    return page.evaluate("k => localStorage.getItem(k)", DRAFT_KEY)


def record_statuses(page: Page) -> None:
    page.evaluate(
        """() => {
            window.__statuses = [];
            window.__buttonDisabled = [];
            const el = document.getElementById('live-status');
            const btn = document.querySelector('#submit-form button[type=submit]');
            new MutationObserver(() => {
                const s = el.getAttribute('data-status');
                if (window.__statuses[window.__statuses.length - 1] !== s) {
                    window.__statuses.push(s);
                    window.__buttonDisabled.push(btn.disabled);
                }
            }).observe(el, {attributes: true, childList: true, characterData: true, subtree: true});
        }"""
    )


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    if not (mock_server.DIST / "app.js").is_file():
        print(f"{mock_server.DIST / 'app.js'} is missing: run `npm run build` in web/", file=sys.stderr)
        return 2
    SHOTS.mkdir(parents=True, exist_ok=True)

    server = mock_server.make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    expect.set_options(timeout=10_000)

    console_errors: list[str] = []
    try:
        with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="web-check-profile-") as profile:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=chromium,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1100, "height": 900},
            )
            page = context.pages[0] if context.pages else context.new_page()
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            page.on("pageerror", lambda e: console_errors.append(f"pageerror: {e}"))

            # -- load ---------------------------------------------------------------------------
            page.goto(base)
            page.evaluate("() => localStorage.clear()")
            page.reload()
            expect(page.locator(".cm-editor")).to_have_count(1)
            expect(page.locator(".cm-editor .cm-lineNumbers")).to_have_count(1)
            expect(page.locator("#source")).to_be_hidden()
            assert page.evaluate(
                "() => document.getElementById('source').nextElementSibling.classList.contains('cm-editor')"
            ), "editor is not right after the textarea"
            assert page.evaluate("() => !!(window.rematEditor && window.rematEditor.dispatch)")
            ok("CodeMirror editor present right after the textarea, textarea hidden, window.rematEditor set")
            starter = page.eval_on_selector("#source", "el => el.defaultValue")
            assert editor_text(page) == starter == textarea_value(page)
            expect(page.locator("#draft-note")).to_be_hidden()
            ok("editor starts with the starter code; #draft-note hidden without a draft")
            # Python highlighting: a keyword span with a colour from the highlight style.
            assert page.locator(".cm-content span").count() > 5, "no syntax highlighting spans"
            editor_h = page.locator(".cm-editor").bounding_box()["height"]
            line_h = page.locator(".cm-line").first.bounding_box()["height"]
            assert editor_h >= 17 * line_h, (editor_h, line_h)
            ok(f"Python highlighting on; editor {editor_h:.0f}px tall (>= 17 lines of {line_h:.0f}px)")

            # -- KaTeX --------------------------------------------------------------------------
            expect(page.locator(".math.inline .katex")).to_have_count(1)
            expect(page.locator(".math.block .katex-display")).to_have_count(2)
            expect(page.locator("#eq1 > a.mathlabel")).to_have_count(1)
            expect(page.locator("#eq1 .katex-error")).to_have_count(0)
            assert "¶" not in page.eval_on_selector("#eq1 annotation", "el => el.textContent")
            assert page.locator(".math.inline .katex-html").is_visible()
            font_ok = page.evaluate(
                "() => document.fonts.check('16px KaTeX_Main') && "
                "[...document.fonts].some(f => f.family.includes('KaTeX') && f.status === 'loaded')"
            )
            assert font_ok, "KaTeX fonts did not load"
            ok("KaTeX rendered .math.inline and .math.block (display mode, labelled equation too); fonts loaded")
            page.screenshot(path=str(SHOTS / "01-loaded.png"), full_page=True)

            # -- typing -------------------------------------------------------------------------
            page.locator(".cm-content").click()
            page.keyboard.press("Control+End")
            page.keyboard.press("Enter")
            page.keyboard.press("Enter")
            page.keyboard.type("def helper(x):")
            page.keyboard.press("Enter")  # auto-indents the body
            page.keyboard.type("return x * 2")
            value = textarea_value(page)
            assert "def helper(x):\n    return x * 2" in value, repr(value[-80:])
            ok("typing in the editor updates the textarea (Enter auto-indents 4 spaces)")
            page.keyboard.press("Enter")
            page.keyboard.press("Shift+Tab")
            page.keyboard.press("Tab")
            page.keyboard.type("pass")
            assert textarea_value(page).endswith("\n    pass"), repr(textarea_value(page)[-40:])
            page.keyboard.press("Control+z")
            page.keyboard.press("Control+z")
            assert "    pass" not in textarea_value(page)
            ok("Tab / Shift-Tab indent, Ctrl-Z undoes")
            page.evaluate(
                """() => { const v = window.rematEditor;
                   v.dispatch({changes: {from: v.state.doc.length, insert: "\\n# via dispatch\\n"}}); }"""
            )
            assert textarea_value(page).endswith("# via dispatch\n")
            ok("window.rematEditor.dispatch(...) updates the textarea")
            edited = textarea_value(page)
            page.wait_for_function("([k, v]) => localStorage.getItem(k) === v", arg=[DRAFT_KEY, edited])
            ok("draft saved to localStorage (debounced)")

            # -- draft restore -----------------------------------------------------------------
            page.reload()
            expect(page.locator(".cm-editor")).to_have_count(1)
            expect(page.locator("#draft-note")).to_be_visible()
            assert editor_text(page) == edited and textarea_value(page) == edited
            ok("reload restores the draft into the editor and the textarea, shows #draft-note")
            page.screenshot(path=str(SHOTS / "02-draft-restored.png"), full_page=True)

            # Fast edit + immediate reload: the pagehide flush keeps the last keystrokes.
            page.locator(".cm-content").click()
            page.keyboard.press("Control+End")
            page.keyboard.type("# last words")
            page.reload()
            assert editor_text(page).endswith("# last words"), repr(editor_text(page)[-40:])
            ok("an edit right before reload is not lost (pagehide flush)")

            page.click("#reset-starter")
            expect(page.locator("#draft-note")).to_be_hidden()
            assert textarea_value(page) == starter and editor_text(page) == starter
            assert draft(page) is None
            page.reload()
            expect(page.locator("#draft-note")).to_be_hidden()
            assert editor_text(page) == starter
            ok("#reset-starter restores the starter, removes the draft, hides #draft-note")

            # -- submit -------------------------------------------------------------------------
            page.evaluate(
                """() => { const v = window.rematEditor;
                   v.dispatch({changes: {from: 0, insert: "# submitted from the check\\n"}}); }"""
            )
            record_statuses(page)
            submit = page.locator("#submit-form button[type=submit]")
            submit.click()
            expect(page.locator("#live-status")).to_have_attribute("data-status", "queued")
            expect(page.locator("#live-status")).to_have_text("Queued…")
            expect(submit).to_be_disabled()
            page.screenshot(path=str(SHOTS / "03-queued.png"), full_page=True)
            expect(page.locator("#live-status")).to_have_attribute("data-status", "running")
            expect(page.locator("#live-status")).to_have_text("Running in the sandbox…")
            page.screenshot(path=str(SHOTS / "04-running.png"), full_page=True)
            expect(page.locator("#live-status")).to_have_attribute("data-status", "done")
            expect(page.locator("#live-status")).to_have_attribute("data-verdict", "WRONG_POLICY")
            expect(page.locator("#live-status")).to_have_text("WRONG_POLICY")
            expect(page.locator("#verdict-panel .verdict-panel[data-verdict=WRONG_POLICY]")).to_have_count(1)
            expect(page.locator("#verdict-panel .katex")).to_have_count(1)
            expect(submit).to_be_enabled()
            statuses = page.evaluate("() => window.__statuses")
            disabled = page.evaluate("() => window.__buttonDisabled")
            assert statuses == ["submitting", "queued", "running", "done"], statuses
            assert all(disabled[:-1]), disabled
            with mock_server._lock:
                sources = list(mock_server._sources.values())
            # Form submission (with or without JS) sends textarea text with CRLF line breaks.
            assert sources and sources[-1].replace("\r\n", "\n") == "# submitted from the check\n" + starter
            assert "\r\n" in sources[-1]
            in_view = page.evaluate(
                "() => { const r = document.getElementById('verdict-panel').getBoundingClientRect();"
                " return r.top < innerHeight && r.bottom > 0; }"
            )
            assert in_view, "verdict panel not scrolled into view"
            ok(
                "submit: POST with the editor's code; statuses submitting→queued→running→done; "
                "button disabled while pending; panel fetched, shown, scrolled into view"
            )
            page.wait_for_timeout(600)  # let the smooth scroll settle
            page.screenshot(path=str(SHOTS / "05-done.png"), full_page=False)
            live = page.locator("#verdict-panel")
            expect(live.locator("#plane-chart [data-point]")).to_have_count(4)
            expect(live.locator("#plane-chart .point-label")).to_have_count(4)
            expect(live.locator(".check.reported")).to_have_count(1)
            expect(live.locator(".check.reported")).not_to_contain_text("✓")
            expect(live.locator("#residual-table tr.only-reference")).to_have_count(1)
            expect(live.locator("#residual-table tr.only-yours")).to_have_count(1)
            expect(live.locator("#recompute-line")).to_contain_text("recomputes 524 k FLOPs")
            live.locator("#plane-chart").screenshot(path=str(SHOTS / "05b-plane.png"))
            ok(
                "the fetched panel has the bytes/recompute-FLOPs plane (4 labelled points), an untick'd "
                "reported-only check, value-marked residuals and the recompute line"
            )

            # -- error paths ---------------------------------------------------------------------
            page.evaluate(
                """() => { const v = window.rematEditor;
                   v.dispatch({changes: {from: 0, insert: "# FAIL_422\\n"}}); }"""
            )
            n_errors = len(console_errors)
            submit.click()
            expect(page.locator("#live-status.error")).to_have_text("Mock rejection: the source contains FAIL_422.")
            expect(page.locator("#live-status")).to_have_attribute("data-status", "error")
            expect(submit).to_be_enabled()
            page.locator("#live-status").scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "06-error-422.png"), full_page=False)
            # Chrome logs the 422 response itself ("Failed to load resource"): expected here.
            del console_errors[n_errors:]
            ok("4xx JSON {detail} is shown in #live-status with class error")

            n_errors = len(console_errors)
            page.route("**/problems/demo/submit", lambda route: route.abort())
            submit.click()
            expect(page.locator("#live-status.error")).to_contain_text("Could not reach the server")
            expect(submit).to_be_enabled()
            page.unroute("**/problems/demo/submit")
            # Chrome logs the aborted request itself ("Failed to load resource"): not ours.
            del console_errors[n_errors:]
            ok("a network failure is shown in #live-status with class error")

            page.evaluate(
                "() => window.rematEditor.dispatch("
                "{changes: {from: 0, to: window.rematEditor.state.doc.length, insert: '  '}})"
            )
            submit.click()
            expect(page.locator("#live-status.error")).to_have_text("The source code is empty.")
            ok("empty source is refused client-side (textarea had `required`)")

            page.evaluate(
                """s => { const v = window.rematEditor;
                   v.dispatch({changes: {from: 0, to: v.state.doc.length, insert: s}}); }""",
                starter,
            )
            expect(page.locator("#verdict-panel")).to_contain_text("Submission #s1")
            submit.click()
            expect(page.locator("#live-status")).to_have_attribute("data-status", "queued")
            expect(page.locator("#verdict-panel")).to_be_empty()
            expect(page.locator("#live-status")).to_have_attribute("data-status", "done", timeout=15_000)
            expect(page.locator("#live-status")).not_to_have_class("error")
            expect(page.locator("#verdict-panel")).to_contain_text("Submission #s2")
            ok("a second submission clears the old panel while pending, then shows its own")

            # -- canned verdict panels (web/dev/verdicts/), desktop and phone ----------------------
            for width in (1280, 390):
                page.set_viewport_size({"width": width, "height": 900})
                for name, points in (("wrong_policy", 4), ("accepted", 4), ("old_report", 0)):
                    page.goto(f"{base}canned/{name}" + ("?wide=1" if width > 1000 else ""))
                    expect(page.locator("#plane-chart [data-point]")).to_have_count(points)
                    overflow = page.evaluate("() => document.scrollingElement.scrollWidth - innerWidth")
                    assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {width}px"
                    sizes = page.eval_on_selector_all(
                        "#plane-chart text", "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))"
                    )
                    assert all(size >= 11 for size in sizes), sizes
                    page.locator(".verdict-panel").screenshot(path=str(SHOTS / f"09-{name}-{width}.png"))
            ok(
                "canned panels (new fields, ACCEPTED, an old report without them) at 1280px and 390px: "
                "no sideways scroll, chart text >= 11px, no chart without FLOPs"
            )

            # -- mobile ----------------------------------------------------------------------------
            page.goto(base)
            page.evaluate("() => localStorage.clear()")
            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            font = page.eval_on_selector(".cm-content", "el => getComputedStyle(el).fontSize")
            assert font == "16px", font
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 390, f"page scrolls horizontally on a phone: {width}px"
            page.screenshot(path=str(SHOTS / "07-mobile.png"), full_page=True)
            ok("phone viewport: editor font 16px, no horizontal page scroll")
            context.close()

            # -- without JavaScript ---------------------------------------------------------------
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
            nojs = browser.new_context(java_script_enabled=False, viewport={"width": 1100, "height": 900})
            page = nojs.new_page()
            page.goto(base)
            expect(page.locator("#source")).to_be_visible()
            expect(page.locator(".cm-editor")).to_have_count(0)
            expect(page.locator(".katex")).to_have_count(0)
            expect(page.locator(".math.block").first).to_have_text("\\sum_i x_i")
            expect(page.locator("#draft-note")).to_be_hidden()
            page.screenshot(path=str(SHOTS / "08-no-js.png"), full_page=True)
            page.locator("#submit-form button[type=submit]").click()
            expect(page.locator("body")).to_contain_text("queued (no-JS path)")
            ok("without JS: plain textarea, raw TeX, hidden #draft-note, the form posts normally")
            browser.close()
    finally:
        server.shutdown()
        server.server_close()

    if console_errors:
        print("console errors:", *console_errors, sep="\n  ", file=sys.stderr)
        return 1
    ok("no console errors")
    print(f"\n{len(passed)} passed, 0 failed")
    print(f"screenshots: {', '.join(sorted(str(s) for s in SHOTS.glob('*.png')))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
