"""LTI 1.3 launches through a real server process and a simulated platform on loopback:
registration seen without a restart, the tool's JWKS, OIDC login initiation, a
student's and an instructor's launch, every refusal, the iframe fallback (a one-time launch token
opened in a new window), and accounts that never merge with an existing email."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from server.lti.keys import thumbprint
from server.store.accounts import UserStore
from server.store.db import make_engine
from server.store.lti_store import LtiStore
from tests.lti_platform import INSTRUCTOR, TEACHING_ASSISTANT, Browser, Platform, parse_form, start_tool
from tests.support import CHROMIUM_ARGS, Server, chromium_path, remat_judge

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform()
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    srv = start_tool(
        tmp_path_factory.mktemp("lti-data"), platform, env={"REMAT_JUDGE_LTI_JWKS_REFETCH_COOLDOWN_S": "1"}
    )
    yield srv
    srv.stop()


def cli(server: Server, *args: str) -> str:
    done = remat_judge(*args, "--data-dir", str(server.data_dir), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def registered(server: Server, platform: Platform) -> Platform:
    """The platform registered while the server runs (the server is never restarted)."""
    browser = Browser(server.url)
    before = browser.login(platform)
    assert before.status_code == 400 and "not registered" in before.text
    browser.close()
    cli(server, *platform.register_args("deployment-1", "deployment-2"))
    return platform


@pytest.fixture
def browser(server: Server, registered: Platform) -> Iterator[Browser]:
    b = Browser(server.url)
    registered.with_launch()
    yield b
    b.close()


def store(server: Server) -> LtiStore:
    return LtiStore(make_engine(f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}"))


def test_the_jwks_serves_the_key_that_verifies_the_tools_jwts(server: Server) -> None:
    path = server.data_dir / "lti_private_key.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    private = serialization.load_pem_private_key(path.read_bytes(), password=None)
    answer = browser_get(server, "/lti/jwks")
    assert answer.status_code == 200 and "x-frame-options" not in answer.headers
    keys = answer.json()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256" and "d" not in keys[0]
    kid = keys[0]["kid"]
    assert kid == thumbprint(private.public_key())  # type: ignore[arg-type]
    token = jwt.encode(
        {"iss": "judge", "aud": "lms", "exp": 2_000_000_000}, private, algorithm="RS256", headers={"kid": kid}
    )
    signing_key = jwt.PyJWKClient(f"{server.url}/lti/jwks").get_signing_key_from_jwt(token)
    assert jwt.decode(token, signing_key.key, algorithms=["RS256"], audience="lms")["iss"] == "judge"


def browser_get(server: Server, path: str):  # type: ignore[no-untyped-def]
    with server.client() as client:
        return client.get(path)


def test_registration_is_listed_and_seen_by_the_running_server(server: Server, registered: Platform) -> None:
    import json

    listed = json.loads(cli(server, "lti", "list", "--json"))
    assert [(p["issuer"], p["client_id"], p["deployment_ids"]) for p in listed] == [
        (registered.issuer, registered.client_id, ["deployment-1", "deployment-2"])
    ]
    assert listed[0]["keyset_url"] == f"{registered.url}/jwks" and listed[0]["token_audience"] is None


def test_login_redirects_to_the_platform_with_every_parameter(
    server: Server, registered: Platform, browser: Browser
) -> None:
    for method in ("GET", "POST"):
        page = browser.login(
            registered,
            method=method,
            login_hint="hint-7",
            message_hint="msg-7",
            target_link_uri=f"{server.url}/lti/launch?problem=remat_sin_sin",
        )
        assert page.status_code == 200, page.text
        sent = registered.auth_requests[-1]
        assert {
            k: sent[k]
            for k in (
                "scope",
                "response_type",
                "response_mode",
                "prompt",
                "client_id",
                "login_hint",
                "lti_message_hint",
                "redirect_uri",
            )
        } == {
            "scope": "openid",
            "response_type": "id_token",
            "response_mode": "form_post",
            "prompt": "none",
            "client_id": registered.client_id,
            "login_hint": "hint-7",
            "lti_message_hint": "msg-7",
            "redirect_uri": f"{server.url}/lti/launch",
        }  # exactly: never with the problem appended
        assert len(sent["state"]) >= 40 and len(sent["nonce"]) >= 40 and sent["state"] != sent["nonce"]


def test_a_students_launch_lands_signed_in_on_the_problem(
    server: Server, registered: Platform, browser: Browser
) -> None:
    ags = {
        "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/score"],
        "lineitems": f"{registered.url}/course/42/lineitems",
        "lineitem": f"{registered.url}/course/42/lineitems/7?type_id=3",
    }
    registered.with_launch(sub="student-1", name="Ada Student", email="ada.student@lms.example", ags=ags)
    assert not browser.signed_in()
    outcome = browser.launch(registered)
    assert outcome.action == f"{server.url}/lti/launch"
    answer = outcome.response
    assert answer.status_code == 200, answer.text[:1000]
    assert urlsplit(str(answer.url)).path == "/problems/remat_sin_sin"
    assert "Ada Student" in answer.text and "x-frame-options" not in answer.headers
    assert browser.signed_in()
    lti = store(server)
    link = lti.lti_user(registered.issuer, "student-1")
    assert link is not None and link.role == "student" and link.email == "ada.student@lms.example"
    user = lti.users.get(link.user_id)
    # a plain user of the judge; the LMS email is a contact, not a sign-in email (it stays free)
    assert user is not None and user.role == "user" and user.email.endswith("@lti.invalid")
    assert user.contact_email == "ada.student@lms.example"
    [resource] = [r for r in lti.resource_links() if r.resource_link_id == "link-1"]
    assert resource.problem == "remat_sin_sin" and resource.deployment_id == "deployment-1"
    assert resource.ags_lineitem == ags["lineitem"] and resource.ags_lineitems == ags["lineitems"]
    assert resource.context_id == "course-42"
    # the same user again: the same account
    again = Browser(server.url)
    assert again.launch(registered).response.status_code == 200
    assert store(server).lti_user(registered.issuer, "student-1").user_id == link.user_id  # type: ignore[union-attr]
    again.close()


def test_the_problem_can_come_from_the_target_link_uri(server: Server, registered: Platform, browser: Browser) -> None:
    registered.with_launch(
        sub="student-2", problem=None, target_link_uri=f"{server.url}/lti/launch?problem=checkpoint_dot_policy"
    )
    answer = browser.launch(registered).response
    assert answer.status_code == 200 and urlsplit(str(answer.url)).path == "/problems/checkpoint_dot_policy"


@pytest.mark.parametrize("roles", [INSTRUCTOR, TEACHING_ASSISTANT], ids=["instructor", "teaching-assistant"])
def test_instructors_launch_as_instructors(
    server: Server, registered: Platform, browser: Browser, roles: list[str]
) -> None:
    registered.with_launch(sub=f"teacher-{len(roles[0])}", name="Grace Teacher", email=None, roles=roles)
    assert browser.launch(registered).response.status_code == 200
    # staff of the launch's course (the instructor pages show it), never a role on the whole judge
    assert browser.client.get(f"{server.url}/instructor", follow_redirects=False).status_code == 200
    assert browser.client.get(f"{server.url}/instructor/clients", follow_redirects=False).status_code == 403
    link = store(server).lti_user(registered.issuer, f"teacher-{len(roles[0])}")
    assert link is not None and link.role == "staff"
    account = store(server).users.get(link.user_id)
    assert account is not None and account.email.endswith("@lti.invalid") and account.role == "user"


def test_an_existing_accounts_email_is_not_merged(server: Server, registered: Platform, browser: Browser) -> None:
    users = UserStore(make_engine(f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}"))
    existing = users.create(email="bob@uni.example", display_name="Bob", password_hash="x")
    registered.with_launch(sub="bob-on-the-lms", name="Bob LMS", email="bob@uni.example")
    assert browser.launch(registered).response.status_code == 200
    link = store(server).lti_user(registered.issuer, "bob-on-the-lms")
    assert link is not None and link.user_id != existing.id
    made = users.get(link.user_id)
    assert made is not None and made.email.startswith("lti-") and made.email.endswith("@lti.invalid")
    assert users.get(existing.id).display_name == "Bob"  # type: ignore[union-attr]


REFUSALS = {
    "signed-with-another-key": (dict(key="other"), 403, "signature"),
    "expired": (dict(exp_in_s=-120, iat_offset_s=-600), 403, "expired"),
    "wrong-audience": (dict(aud="another-tool"), 403, "another tool"),
    "audience-list-without-azp": (dict(aud=["judge-client", "another-tool"]), 403, "authorized party"),
    "unknown-deployment": (dict(deployment_id="deployment-9"), 403, "deployment"),
    "foreign-nonce": (dict(nonce="a-nonce-this-login-never-made"), 403, "nonce"),
    "wrong-message-type": (dict(message_type="LtiSubmissionReviewRequest"), 403, "LtiResourceLinkRequest"),
    "wrong-version": (dict(version="1.1"), 403, "version"),
    "unknown-problem": (dict(problem="no_such_problem"), 404, "does not have"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_bad_launches_are_refused_and_sign_nobody_in(
    server: Server, registered: Platform, browser: Browser, name: str
) -> None:
    changes, code, words = REFUSALS[name]
    registered.with_launch(sub=f"refused-{name}", **changes)
    answer = browser.launch(registered).response
    assert answer.status_code == code, answer.text[:1000]
    assert "text/html" in answer.headers["content-type"] and words in answer.text
    assert "Nobody was signed in" in answer.text
    assert not browser.signed_in()
    assert store(server).lti_user(registered.issuer, f"refused-{name}") is None


def test_a_replayed_launch_is_refused(server: Server, registered: Platform, browser: Browser) -> None:
    registered.with_launch(sub="replayer")
    first = browser.launch(registered)
    assert first.response.status_code == 200
    # the same form (id_token, state) posted again, by this browser and by another
    for client in (browser, Browser(server.url)):
        again = client.client.post(first.action, data=first.form, headers={"accept": "text/html"})
        assert again.status_code == 403 and "already used" in again.text
    # the same id_token with a fresh state of a new login: its nonce is not this login's
    page = browser.login(registered)
    replay = browser.client.post(
        first.action,
        data={"id_token": first.form["id_token"], "state": registered.auth_requests[-1]["state"]},
        headers={"accept": "text/html"},
    )
    assert replay.status_code == 403 and "nonce" in replay.text
    assert page.status_code == 200


def test_a_missing_or_forged_state_is_refused(server: Server, registered: Platform, browser: Browser) -> None:
    registered.with_launch(sub="stateless")
    token = registered.id_token("some-nonce")
    action = f"{server.url}/lti/launch"
    missing = browser.client.post(action, data={"id_token": token}, headers={"accept": "text/html"})
    assert missing.status_code == 400 and "no state" in missing.text
    forged = browser.client.post(
        action, data={"id_token": token, "state": "forged-state"}, headers={"accept": "text/html"}
    )
    assert forged.status_code == 403 and "state" in forged.text
    assert not browser.signed_in()


def test_a_state_started_in_another_browser_is_refused(server: Server, registered: Platform) -> None:
    """Login CSRF: a state from the attacker's login, posted from a victim's browser that keeps
    the tool's cookies (it has a state cookie of its own login, not of this one)."""
    attacker, victim = Browser(server.url), Browser(server.url)
    registered.with_launch(sub="attacker")
    attackers_page = attacker.login(registered)
    assert victim.login(registered).status_code == 200  # the victim's own login leaves its state cookie
    action, fields = parse_form(attackers_page.text)
    answer = victim.client.post(action, data=fields, headers={"accept": "text/html"})
    assert answer.status_code == 403 and "another browser" in answer.text
    assert not victim.signed_in()
    attacker.close()
    victim.close()


def test_without_cookies_in_the_iframe_the_launch_opens_in_a_new_window(
    server: Server, registered: Platform, browser: Browser
) -> None:
    registered.with_launch(sub="iframe-user", name="Iris Frame")
    page = browser.login(registered)
    action, fields = parse_form(page.text)
    browser.client.cookies.clear()  # third-party cookies blocked: neither the state nor the session cookie
    launched = browser.client.post(action, data=fields, headers={"accept": "text/html"}, follow_redirects=False)
    assert launched.status_code == 303 and launched.headers["location"].startswith("/lti/landing?token=")
    browser.client.cookies.clear()  # the session cookie the launch set is not kept inside the iframe either
    landing = browser.client.get(f"{server.url}{launched.headers['location']}", follow_redirects=False)
    assert landing.status_code == 200 and "new window" in landing.text and "Iris Frame" in landing.text
    open_path = parse_qs(urlsplit(launched.headers["location"]).query)["token"][0]
    window = Browser(server.url)  # the new, first-party window
    opened = window.client.get(f"{server.url}/lti/open", params={"token": open_path})
    assert opened.status_code == 200 and urlsplit(str(opened.url)).path == "/problems/remat_sin_sin"
    assert window.signed_in() and "Iris Frame" in opened.text
    reused = Browser(server.url)
    second = reused.client.get(f"{server.url}/lti/open", params={"token": open_path})
    assert second.status_code == 400 and not reused.signed_in()
    window.close()
    reused.close()


def test_a_removed_platform_is_refused_at_once(server: Server, tmp_path: Path) -> None:
    other = Platform(client_id="other-client")
    try:
        other.redirect_uris = [f"{server.url}/lti/launch"]
        cli(server, *other.register_args("d-1"))
        b = Browser(server.url)
        other.with_launch(sub="gone", deployment_id="d-1")
        assert b.launch(other, deployment_id="d-1").response.status_code == 200
        cli(server, "lti", "remove", other.issuer, other.client_id)
        again = Browser(server.url)
        refused = again.login(other, deployment_id="d-1")
        assert refused.status_code == 400 and "not registered" in refused.text
        b.close()
        again.close()
    finally:
        other.close()


def test_a_rotated_platform_key_is_fetched_and_an_unpublished_kid_refused(
    server: Server, registered: Platform, browser: Browser
) -> None:
    from tests.lti_platform import new_key

    old_key, old_kid = registered.key, registered.kid
    try:
        registered.key, registered.kid = new_key(), "platform-key-2"  # the platform rotates its key
        time.sleep(1.2)  # past the refetch cooldown (1 s in this server) since the last fetch
        fetches = registered.jwks_fetches
        registered.with_launch(sub="after-rotation")
        assert browser.launch(registered).response.status_code == 200
        assert registered.jwks_fetches == fetches + 1  # the unknown kid made the tool fetch the JWKS again
        other = Browser(server.url)
        page = other.login(registered)
        action, fields = parse_form(page.text)
        claims = jwt.decode(fields["id_token"], options={"verify_signature": False})
        fields["id_token"] = registered.sign(claims, key="other", kid="a-kid-nobody-publishes")
        time.sleep(1.2)
        refused = other.client.post(action, data=fields, headers={"accept": "text/html"})
        assert refused.status_code == 403 and "does not publish" in refused.text and not other.signed_in()
        other.close()
    finally:
        registered.key, registered.kid = old_key, old_kid
        time.sleep(1.2)  # so the next launch may fetch the restored key (past the cooldown)


def test_the_setup_page_shows_instructors_what_to_paste_into_the_lms(
    server: Server, registered: Platform, browser: Browser
) -> None:
    setup = f"{server.url}/lti/setup"
    assert browser.client.get(setup, follow_redirects=False).status_code == 303  # not signed in
    registered.with_launch(sub="setup-student")
    assert browser.launch(registered).response.status_code == 200
    assert browser.client.get(setup).status_code == 403
    teacher = Browser(server.url)
    registered.with_launch(sub="setup-teacher", roles=INSTRUCTOR)
    assert teacher.launch(registered).response.status_code == 200
    assert teacher.client.get(setup).status_code == 403  # an LMS instructor is staff of a course, not an admin
    account = store(server).users.get(store(server).lti_user(registered.issuer, "setup-teacher").user_id)  # type: ignore[union-attr]
    cli(server, "users", "role", account.email, "admin")  # type: ignore[union-attr]
    page = teacher.client.get(setup)
    kid = browser_get(server, "/lti/jwks").json()["keys"][0]["kid"]
    assert page.status_code == 200
    for text in (
        f"{server.url}/lti/login",
        f"{server.url}/lti/launch",
        f"{server.url}/lti/jwks",
        kid,
        "BEGIN PUBLIC KEY",
        registered.issuer,
        "deployment-2",
    ):
        assert text in page.text
    teacher.close()


@pytest.mark.browser
def test_in_chromium_a_cross_site_iframe_launch_offers_a_new_window(server: Server, registered: Platform) -> None:
    """Debian's Chromium: the course page at http://localhost:<port> (another site than the tool
    at 127.0.0.1) embeds the launch in an iframe. The tool's cookies are not kept in that
    cross-site frame (Lax on plain HTTP), so the launch relies on the server-side state and the
    landing offers the problem in a new window, which signs the user in there."""
    from urllib.parse import urlencode

    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    registered.with_launch(sub="chromium-student", name="Chromium Student")
    login = f"{server.url}/lti/login?" + urlencode(
        {
            "iss": registered.issuer,
            "login_hint": "h",
            "target_link_uri": f"{server.url}/lti/launch",
            "client_id": registered.client_id,
            "lti_deployment_id": "deployment-1",
        }
    )
    course = registered.url.replace("127.0.0.1", "localhost") + "/course?" + urlencode({"login": login})
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        context = chromium.new_context()
        page = context.new_page()
        page.goto(course)
        frame = page.frame_locator("#tool")
        link = frame.locator("#open-new-window")
        link.wait_for(timeout=30_000)
        assert "Chromium Student" in frame.locator("main").inner_text()
        with context.expect_page() as opened:
            link.click()
        window = opened.value
        window.wait_for_load_state()
        assert urlsplit(window.url).path == "/problems/remat_sin_sin"
        assert "Chromium Student" in window.locator("header").inner_text()
        context.close()
        chromium.close()


@pytest.mark.browser
def test_in_chromium_a_top_level_cross_site_launch_lands_signed_in(server: Server) -> None:
    """Debian's Chromium: the LMS (at http://localhost:<port>, another site) opens the activity in
    the whole window: the launch is a cross-site top-level POST, and the landing opens the
    problem signed in, with no extra click."""
    from urllib.parse import urlencode

    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    lms = Platform(client_id="top-level-client")
    try:
        lms.url = lms.url.replace("127.0.0.1", "localhost")  # the platform's pages and endpoints: another site
        lms.redirect_uris = [f"{server.url}/lti/launch"]
        cli(server, *lms.register_args("deployment-1"))
        lms.with_launch(sub="top-level-student", name="Topsy Level")
        login = f"{server.url}/lti/login?" + urlencode(
            {
                "iss": lms.issuer,
                "login_hint": "h",
                "target_link_uri": f"{server.url}/lti/launch",
                "client_id": lms.client_id,
                "lti_deployment_id": "deployment-1",
            }
        )
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
            context = chromium.new_context()
            page = context.new_page()
            page.goto(f"{lms.url}/course?" + urlencode({"login": "about:blank"}))  # start on the LMS's site
            page.goto(login, referer=f"{lms.url}/course")
            page.wait_for_url(f"{server.url}/problems/**", timeout=30_000)
            assert "Topsy Level" in page.locator("header").inner_text()
            context.close()
            chromium.close()
    finally:
        lms.close()
