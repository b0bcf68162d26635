"""LTI Dynamic Registration 1.0 end to end: a one-time URL from the command line, the
simulated platform's OpenID configuration and registration endpoint over real HTTP, the platform
stored with the client id and deployment it answered, then a launch with that client id; a used,
expired or refused URL registers nothing; the Canvas JSON at its stable URL; and in Chromium, the
page that tells the LMS's dialog to close."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from server.store.db import make_engine, utcnow
from server.store.lti import RegistrationUrl
from tests.lti_platform import Browser, Platform, start_tool
from tests.support import CHROMIUM_ARGS, Server, chromium_path, remat_judge

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # the simulated platforms listen on 127.0.0.1, a loopback address the judge calls only when allowed
    srv = start_tool(
        tmp_path_factory.mktemp("lti-dynreg"), Platform(), env={"REMAT_JUDGE_LTI_ALLOW_NETWORKS": '["127.0.0.0/8"]'}
    )
    yield srv
    srv.stop()


def cli(server: Server, *args: str) -> str:
    done = remat_judge(*args, "--data-dir", str(server.data_dir), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def registration_url(server: Server, minutes: int = 60) -> str:
    out = cli(server, "lti", "registration-url", "--base-url", server.url, "--expires-minutes", str(minutes))
    url = out.strip().splitlines()[-1]  # the URL is the last line
    assert url.startswith(f"{server.url}/lti/dynamic-registration/"), out
    return url


def open_as_platform(url: str, platform: Platform, token: str | None = None) -> httpx.Response:
    params = {
        "openid_configuration": f"{platform.url}/.well-known/openid-configuration",
        "registration_token": token or platform.registration_token,
    }
    return httpx.get(url, params=params, timeout=60)


def platforms(server: Server) -> list[dict]:
    return json.loads(cli(server, "lti", "list", "--json"))


def test_a_one_time_url_registers_the_platform_and_its_launches_work(server: Server) -> None:
    lms = Platform()
    try:
        url = registration_url(server)
        page = open_as_platform(url, lms)
        assert page.status_code == 200, page.text
        assert "is registered" in page.text and "org.imsglobal.lti.close" in page.text
        sent = lms.registrations[-1]
        tool = sent["https://purl.imsglobal.org/spec/lti-tool-configuration"]
        assert sent["redirect_uris"] == [f"{server.url}/lti/launch"]
        assert sent["initiate_login_uri"] == f"{server.url}/lti/login" and sent["jwks_uri"] == f"{server.url}/lti/jwks"
        assert {m["type"] for m in tool["messages"]} == {"LtiResourceLinkRequest", "LtiDeepLinkingRequest"}
        assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in sent["scope"].split()
        registered = [p for p in platforms(server) if p["issuer"] == lms.issuer]
        assert [
            (p["client_id"], p["deployment_ids"], p["auth_login_url"], p["auth_token_url"], p["keyset_url"])
            for p in registered
        ] == [("dynamic-client-1", ["dynamic-deployment"], f"{lms.url}/auth", f"{lms.url}/token", f"{lms.url}/jwks")]
        lms.with_launch(sub="dynamic-student", name="Dyna Student", deployment_id="dynamic-deployment")
        browser = Browser(server.url)
        landed = browser.launch(lms, deployment_id="dynamic-deployment")
        assert landed.response.status_code == 200 and "Dyna Student" in landed.response.text
        assert landed.response.url.path == "/problems/remat_sin_sin"
        browser.close()

        again = open_as_platform(url, lms)  # the URL is spent
        assert again.status_code == 410 and len(lms.registrations) == 1
        assert len([p for p in platforms(server) if p["issuer"] == lms.issuer]) == 1
    finally:
        lms.close()


def test_an_expired_url_or_a_refused_registration_registers_nothing(server: Server) -> None:
    lms = Platform()
    try:
        expired = registration_url(server, minutes=1)
        engine = make_engine(f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}")
        with engine.begin() as connection:  # a minute later
            connection.execute(update(RegistrationUrl).values(expires_at=utcnow() - timedelta(seconds=1)))
        answer = open_as_platform(expired, lms)
        assert answer.status_code == 410 and "expired" in answer.text and lms.registrations == []

        url = registration_url(server)
        refused = open_as_platform(url, lms, token="a-wrong-token")  # the platform refuses the registration
        assert refused.status_code == 502 and "refused the registration (401)" in refused.text
        lms.configured_issuer = "https://elsewhere.example"  # a configuration that names another site
        forged = open_as_platform(url, lms)  # nothing was registered, so the URL may be tried again
        assert forged.status_code == 502 and "not the site it was fetched from" in forged.text
        assert lms.registrations == [] and not [p for p in platforms(server) if p["issuer"] == lms.issuer]
        lms.configured_issuer = None
        assert open_as_platform(url, lms).status_code == 200  # fixed: the same URL now works, once
        assert httpx.get(url, timeout=30).status_code == 410
        missing = httpx.get(registration_url(server), timeout=30)
        assert missing.status_code == 400 and "openid_configuration" in missing.text
    finally:
        lms.close()


def test_the_canvas_configuration_is_at_a_stable_url(server: Server) -> None:
    config = httpx.get(f"{server.url}/lti/canvas.json", timeout=30).json()
    assert config["oidc_initiation_url"] == f"{server.url}/lti/login"
    assert config["target_link_uri"] == f"{server.url}/lti/launch"
    assert config["public_jwk_url"] == f"{server.url}/lti/jwks"
    assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in config["scopes"]
    placements = config["extensions"][0]["settings"]["placements"]
    assert {p["message_type"] for p in placements} == {"LtiDeepLinkingRequest"}


@pytest.mark.browser
def test_in_chromium_the_lms_dialog_closes_when_registration_is_done(server: Server) -> None:
    from urllib.parse import urlencode

    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    lms = Platform()
    try:
        url = registration_url(server)
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
            page = chromium.new_page()
            page.goto(f"{lms.url}/add-tool?{urlencode({'url': url})}")
            page.wait_for_function("document.getElementById('status').textContent === 'closed'", timeout=30_000)
            chromium.close()
        assert len(lms.registrations) == 1
    finally:
        lms.close()
