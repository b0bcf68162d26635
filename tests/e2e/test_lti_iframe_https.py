"""An LMS iframe on the defaults, in Debian's Chromium: the judge serves HTTPS
(`serve --ssl-certfile`, a self-signed certificate the browser is told to accept) with only its
public URL set; the course page is another site (http://localhost:<port>, the simulated
platform) that embeds the launch in an iframe.

- With third-party cookies allowed (a profile whose cookie setting allows them), the state and
  session cookies are `SameSite=None; Secure` and come back inside the iframe: the problem opens
  there, signed in, with no new window.
- With them blocked (Chromium's default here), a login that names the platform's storage frame
  (`lti_storage_target`) is bound through postMessage storage and accepted; one that does not is
  refused, and its "open in a new window" button launches again first-party and lands signed in.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from tests.lti_platform import Platform
from tests.support import CHROMIUM_ARGS, Server, chromium_path, remat_judge, self_signed_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform(client_id="iframe-https-client")
    lms.url = lms.url.replace("127.0.0.1", "localhost")  # the course pages and OIDC endpoints: another site
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("lti-https")
    srv = Server(
        data,
        workers=1,
        tls=self_signed_certificate(data / "tls"),
        env={"REMAT_JUDGE_RATE_LIMIT": "", "REMAT_JUDGE_LTI_RATE_LIMIT": ""},
    )
    srv.env["REMAT_JUDGE_PUBLIC_URL"] = srv.url  # the one setting an administrator makes
    srv.start()
    platform.redirect_uris = [f"{srv.url}/lti/launch"]
    done = remat_judge(*platform.register_args("deployment-1"), "--data-dir", str(data), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    yield srv
    srv.stop()


def course_url(server: Server, platform: Platform, storage: str | None = None) -> str:
    params = {
        "iss": platform.issuer,
        "login_hint": "h",
        "target_link_uri": f"{server.url}/lti/launch",
        "client_id": platform.client_id,
        "lti_deployment_id": "deployment-1",
    }
    if storage:
        params["lti_storage_target"] = storage
    course = {"login": f"{server.url}/lti/login?{urlencode(params)}", **({"storage": storage} if storage else {})}
    return f"{platform.url}/course?{urlencode(course)}"


def browser_context(p, *, third_party_cookies: bool):  # type: ignore[no-untyped-def]
    """A Chromium profile (persistent context) that accepts the judge's certificate; its cookie
    setting allows third-party cookies or keeps Chromium's default (blocked)."""
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    if third_party_cookies:
        os.makedirs(f"{profile}/Default")
        Path(f"{profile}/Default/Preferences").write_text(
            json.dumps({"profile": {"cookie_controls_mode": 0, "block_third_party_cookies": False}})
        )
    return p.chromium.launch_persistent_context(
        profile,
        executable_path=chromium_path(),
        headless=True,
        ignore_https_errors=True,
        args=[*CHROMIUM_ARGS, "--ignore-certificate-errors"],
    )


def test_in_an_iframe_over_https_the_cookies_come_back_and_the_problem_opens_there(
    server: Server, platform: Platform
) -> None:
    from playwright.sync_api import sync_playwright

    platform.with_launch(sub="iframe-https", name="Hattie Https")
    with sync_playwright() as p:
        context = browser_context(p, third_party_cookies=True)
        page = context.new_page()
        page.goto(course_url(server, platform))
        frame = page.frame_locator("#tool")
        frame.locator("#problem-title, h1").first.wait_for(timeout=30_000)
        tool = next(f for f in page.frames if f.url.startswith(server.url))
        assert urlsplit(tool.url).path == "/problems/remat_sin_sin", tool.url  # no "open in a new window"
        assert "Hattie Https" in frame.locator("header").inner_text()
        context.close()


def test_with_third_party_cookies_blocked_the_platforms_storage_binds_the_launch(
    server: Server, platform: Platform
) -> None:
    from playwright.sync_api import sync_playwright

    platform.with_launch(sub="storage-https", name="Stella Storage")
    with sync_playwright() as p:
        context = browser_context(p, third_party_cookies=False)
        page = context.new_page()
        page.goto(course_url(server, platform, storage="post_message_forwarding"))
        frame = page.frame_locator("#tool")
        link = frame.locator("#open-new-window")  # accepted: the session cookie is not kept in the frame either
        link.wait_for(timeout=30_000)
        assert "Stella Storage" in frame.locator("main").inner_text()
        with context.expect_page() as opened:
            link.click()
        window = opened.value
        window.wait_for_load_state()
        assert urlsplit(window.url).path == "/problems/remat_sin_sin"
        assert "Stella Storage" in window.locator("header").inner_text()
        context.close()


def test_with_third_party_cookies_blocked_and_no_storage_the_launch_relaunches_first_party(
    server: Server, platform: Platform
) -> None:
    from playwright.sync_api import sync_playwright

    platform.with_launch(sub="relaunch-https", name="Rene Relaunch")
    with sync_playwright() as p:
        context = browser_context(p, third_party_cookies=False)
        page = context.new_page()
        page.goto(course_url(server, platform))
        frame = page.frame_locator("#tool")
        button = frame.locator("#relaunch-new-window")
        button.wait_for(timeout=30_000)
        assert "Rene Relaunch" not in frame.locator("body").inner_text()  # nobody signed in inside the frame
        with context.expect_page() as opened:
            button.click()
        window = opened.value
        window.wait_for_url(f"{server.url}/problems/**", timeout=30_000)
        assert "Rene Relaunch" in window.locator("header").inner_text()
        context.close()
