"""Launches whose state cookie does not come back (third-party cookies blocked inside the LMS's
iframe), fast (TestClient over https, real SQLite, the simulated platform's real JWKS on
loopback): over HTTPS such a launch is accepted only through the platform's postMessage storage
(LTI Client Side postMessage Storage), bound to the browser by a value only the judge's own page
can post back; without it, it is refused with the same login offered again in a new window."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from server.app import create_app
from server.deps import get_services
from server.runtime import build_lti
from server.settings import Settings
from server.store.lti_store import LtiStore
from tests.lti_platform import Platform
from tests.support import PROBLEMS
from tests.unit.test_api_admission import make_services

JUDGE = "https://testserver"


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform()
    lms.redirect_uris = [f"{JUDGE}/lti/launch"]
    yield lms
    lms.close()


@pytest.fixture
def app(tmp_path: Path, platform: Platform):  # type: ignore[no-untyped-def]
    config = Settings(
        data_dir=tmp_path, problems_dir=PROBLEMS, hidden_seed="unit", lti_rate_limit="", lti_platform_rate_limit=""
    )
    services = make_services(config, f"sqlite:///{tmp_path / 'judge.db'}")
    made = create_app(config)
    made.dependency_overrides[get_services] = lambda: services
    services.lti = build_lti(config, services.engine)  # type: ignore[arg-type]
    LtiStore(services.engine).register(  # type: ignore[arg-type]
        issuer=platform.issuer,
        client_id=platform.client_id,
        deployment_ids=["deployment-1"],
        auth_login_url=f"{platform.url}/auth",
        auth_token_url=f"{platform.url}/token",
        keyset_url=f"{platform.url}/jwks",
    )
    return made


def browser(app) -> TestClient:  # type: ignore[no-untyped-def]
    return TestClient(app, base_url=JUDGE)


def login(client: TestClient, platform: Platform, **extra: str):  # type: ignore[no-untyped-def]
    return client.get(
        "/lti/login",
        params={
            "iss": platform.issuer,
            "login_hint": "hint-1",
            "lti_message_hint": "m-1",
            "target_link_uri": f"{JUDGE}/lti/launch",
            "client_id": platform.client_id,
            "lti_deployment_id": "deployment-1",
            **extra,
        },
        follow_redirects=False,
    )


def attribute(page: str, name: str) -> str:
    found = re.search(rf'{name}="([^"]*)"', page)
    assert found, f"no {name} in {page[:400]}"
    return html.unescape(found.group(1))


def form_fields(page: str) -> dict[str, str]:
    return {m.group(1): html.unescape(m.group(2)) for m in re.finditer(r'name="(\w+)" value="([^"]*)"', page)}


def auth_params(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def signed_in(client: TestClient) -> bool:
    return client.get("/me", follow_redirects=False).status_code == 200


def test_a_cookieless_launch_without_storage_is_refused_and_relaunches_in_a_new_window(app, platform) -> None:
    iframe = browser(app)
    started = login(iframe, platform)
    assert started.status_code == 302
    cookie = next(h for h in started.headers.get_list("set-cookie") if h.startswith("remat_lti_state_")).lower()
    assert "samesite=none" in cookie and "secure" in cookie
    sent = auth_params(started.headers["location"])
    iframe.cookies.clear()  # third-party cookies blocked: the state cookie does not come back
    token = platform.id_token(sent["nonce"])
    refused = iframe.post("/lti/launch", data={"id_token": token, "state": sent["state"]}, follow_redirects=False)
    assert refused.status_code == 403 and "new window" in refused.text and not signed_in(iframe)
    relaunch = attribute(refused.text, 'id="relaunch-new-window" href')
    assert auth_params(relaunch) == {
        "iss": platform.issuer,
        "login_hint": "hint-1",
        "lti_message_hint": "m-1",
        "target_link_uri": f"{JUDGE}/lti/launch",
        "client_id": platform.client_id,
        "lti_deployment_id": "deployment-1",
    }
    again = iframe.post("/lti/launch", data={"id_token": token, "state": sent["state"]}, follow_redirects=False)
    assert again.status_code == 403 and "already used" in again.text  # the refused login is spent

    window = browser(app)  # the new, first-party window: its cookie comes back
    second = window.get(relaunch, follow_redirects=False)
    sent = auth_params(second.headers["location"])
    landed = window.post(
        "/lti/launch",
        data={"id_token": platform.id_token(sent["nonce"]), "state": sent["state"]},
        follow_redirects=False,
    )
    assert landed.status_code == 303 and landed.headers["location"].startswith("/lti/landing?token=")
    assert signed_in(window)


def test_a_cookieless_launch_is_bound_through_the_platforms_storage(app, platform) -> None:
    iframe = browser(app)
    page = login(iframe, platform, lti_storage_target="post_message_forwarding")
    assert page.status_code == 200 and 'data-mode="put"' in page.text and "/static/lti_storage.js" in page.text
    assert attribute(page.text, "data-target") == "post_message_forwarding"
    assert attribute(page.text, "data-origin") == platform.url  # the OIDC authorization endpoint's origin
    key, binding, next_url = (attribute(page.text, f"data-{n}") for n in ("key", "value", "next"))
    sent = auth_params(next_url)
    assert next_url.startswith(f"{platform.url}/auth?") and sent["state"] not in key and len(binding) >= 40
    iframe.cookies.clear()
    token = platform.id_token(sent["nonce"])
    reading = iframe.post("/lti/launch", data={"id_token": token, "state": sent["state"]}, follow_redirects=False)
    assert reading.status_code == 200 and 'data-mode="get"' in reading.text
    assert reading.headers["referrer-policy"] == "same-origin"  # no-referrer would make its POST's Origin "null"
    assert attribute(reading.text, "data-key") == key and attribute(reading.text, "data-origin") == platform.url
    fields = form_fields(reading.text)
    assert fields == {"id_token": token, "state": sent["state"], "binding": ""}
    assert 'action="/lti/launch/storage"' in reading.text
    # the page read the binding back from the platform's storage and posts it, from the judge's origin
    landed = iframe.post(
        "/lti/launch/storage",
        data={**fields, "binding": binding},
        follow_redirects=False,
        headers={"Origin": JUDGE, "Sec-Fetch-Site": "same-origin"},
    )
    assert landed.status_code == 303 and landed.headers["location"].startswith("/lti/landing?token=")
    replay = iframe.post(
        "/lti/launch/storage", data={**fields, "binding": binding}, follow_redirects=False, headers={"Origin": JUDGE}
    )
    assert replay.status_code == 403  # a login is used once


@pytest.mark.parametrize(
    "headers",
    [{}, {"Origin": "https://evil.example"}, {"Origin": "null"}, {"Origin": JUDGE, "Sec-Fetch-Site": "cross-site"}],
)
def test_login_csrf_through_storage_is_refused(app, platform, headers: dict[str, str]) -> None:
    """The attacker starts a storage login in their own browser, so they know its binding and get a
    genuine id_token; the victim's browser can be made to post them, but not from the judge's
    origin, and the judge's own page reads the victim's storage, which holds no such binding."""
    attacker = browser(app)
    page = login(attacker, platform, lti_storage_target="_parent")
    binding, sent = attribute(page.text, "data-value"), auth_params(attribute(page.text, "data-next"))
    platform.with_launch(sub="attacker")
    fields = {"id_token": platform.id_token(sent["nonce"]), "state": sent["state"]}
    victim = browser(app)
    forged = victim.post(
        "/lti/launch/storage", data={**fields, "binding": binding}, headers=headers, follow_redirects=False
    )
    assert forged.status_code == 403 and not signed_in(victim)
    # through the judge's own page, the victim's storage has nothing for this state
    own = victim.post(
        "/lti/launch/storage", data={**fields, "binding": ""}, headers={"Origin": JUDGE}, follow_redirects=False
    )
    assert own.status_code == 403 and "new window" in own.text and not signed_in(victim)
    platform.with_launch()


def test_a_storage_target_that_is_not_a_frame_name_is_ignored(app, platform) -> None:
    client = browser(app)
    answer = login(client, platform, lti_storage_target='x" onload="alert(1)')
    assert answer.status_code == 302 and "onload" not in answer.text  # an ordinary cookie login


def test_a_deep_linking_pick_without_cookies_is_bound_by_its_origin(app, platform) -> None:
    """An instructor whose browser blocks third-party cookies opens the problem list through
    platform storage; the pick (no binding cookie) is accepted from the judge's own page only."""
    from tests.lti_platform import parse_form

    iframe = browser(app)
    page = login(iframe, platform, lti_storage_target="post_message_forwarding")
    binding, sent = attribute(page.text, "data-value"), auth_params(attribute(page.text, "data-next"))
    platform.with_deep_linking(sub="storage-teacher")
    iframe.cookies.clear()
    token = platform.id_token(sent["nonce"])
    fields = {"id_token": token, "state": sent["state"], "binding": binding}
    picker = iframe.post("/lti/launch/storage", data=fields, headers={"Origin": JUDGE}, follow_redirects=False)
    assert picker.status_code == 200 and picker.headers["referrer-policy"] == "same-origin", picker.text[:500]
    action, form = parse_form(picker.text, "deep-linking-pick")
    iframe.cookies.clear()  # the binding cookie is not kept in the iframe either
    foreign = iframe.post(action, data={**form, "problem": "remat_sin_sin"}, headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "deep-linking-response" not in foreign.text
    picked = iframe.post(action, data={**form, "problem": "remat_sin_sin"}, headers={"Origin": JUDGE})
    assert picked.status_code == 200 and "deep-linking-response" in picked.text
    platform.with_launch()
