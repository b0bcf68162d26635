"""LTI Deep Linking 2.0 through a real server process and the simulated platform:
an instructor's LtiDeepLinkingRequest shows the problem list; picking one answers the platform's
deep_link_return_url with a JWT that verifies against the tool's /lti/jwks and carries every
claim; a student, a request without deep_linking_settings and a replayed or foreign picker form
are refused; the returned link, launched by a student, lands on its problem."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from tests.lti_platform import STUDENT, Browser, Outcome, Platform, parse_form, start_tool
from tests.support import Server, remat_judge

pytestmark = [pytest.mark.e2e]

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
PICK_FORM = "deep-linking-pick"
RETURN_FORM = "deep-linking-response"


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform()
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    srv = start_tool(
        tmp_path_factory.mktemp("lti-dl-data"), platform, env={"REMAT_JUDGE_LTI_JWKS_REFETCH_COOLDOWN_S": "1"}
    )
    platform.tool_jwks_url = f"{srv.url}/lti/jwks"
    done = remat_judge(*platform.register_args("deployment-1"), "--data-dir", str(srv.data_dir), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    yield srv
    srv.stop()


@pytest.fixture
def browser(server: Server, platform: Platform) -> Iterator[Browser]:
    b = Browser(server.url)
    platform.with_deep_linking()
    yield b
    b.close()


def open_picker(browser: Browser, platform: Platform) -> Outcome:
    """A deep linking launch up to the tool's problem list."""
    outcome = browser.launch(platform)
    assert outcome.response.status_code == 200, outcome.response.text[:1000]
    return outcome


def pick(browser: Browser, page_text: str, slug: str) -> tuple[str, dict[str, str], object]:
    """Submits the picker form choosing `slug`: (action, fields, the tool's answer)."""
    action, fields = parse_form(page_text, PICK_FORM)
    answer = browser.client.post(
        browser.tool_url + action if action.startswith("/") else action,
        data={**fields, "problem": slug},
        headers={"accept": "text/html"},
    )
    return action, fields, answer


def test_an_instructor_picks_a_problem_and_the_platform_gets_a_signed_deep_linking_response(
    server: Server, platform: Platform, browser: Browser
) -> None:
    outcome = open_picker(browser, platform)
    page = outcome.response
    assert "x-frame-options" not in page.headers and "content-security-policy" not in page.headers
    assert 'value="remat_sin_sin"' in page.text and "Add a problem to the course" in page.text
    action, fields = parse_form(page.text, PICK_FORM)
    assert action == "/lti/deep-linking" and fields["csrf"] and fields["context"]

    _, _, answer = pick(browser, page.text, "remat_sin_sin")
    assert answer.status_code == 200, answer.text[:1000]  # type: ignore[attr-defined]
    assert "x-frame-options" not in answer.headers  # type: ignore[attr-defined]
    return_action, return_fields = parse_form(answer.text, RETURN_FORM)  # type: ignore[attr-defined]
    assert return_action == platform.deep_link_return_url and set(return_fields) == {"JWT"}
    assert "document.getElementById('deep-linking-response').submit()" in answer.text  # type: ignore[attr-defined]

    received = browser.client.post(return_action, data=return_fields)  # what the auto-submit does
    assert received.status_code == 200, received.text
    assert platform.deep_link_responses[-1] == return_fields["JWT"]
    claims = platform.deep_link_claims[-1]  # verified by the platform against /lti/jwks (PyJWT)

    header = jwt.get_unverified_header(return_fields["JWT"])
    tool_kid = browser.client.get(f"{server.url}/lti/jwks").json()["keys"][0]["kid"]
    assert header["alg"] == "RS256" and header["kid"] == tool_kid
    assert claims["iss"] == platform.client_id and claims["aud"] == platform.issuer
    assert claims["exp"] - claims["iat"] == 300 and abs(claims["iat"] - time.time()) < 60
    assert isinstance(claims["nonce"], str) and len(claims["nonce"]) >= 20
    assert claims[LTI + "message_type"] == "LtiDeepLinkingResponse"
    assert claims[LTI + "version"] == "1.3.0" and claims[LTI + "deployment_id"] == "deployment-1"
    assert claims[DL + "data"] == "opaque-platform-data"
    [item] = claims[DL + "content_items"]
    assert item["type"] == "ltiResourceLink" and item["title"] == "Rematerialize sin(sin(x))"
    assert item["url"] == f"{server.url}/lti/launch?problem=remat_sin_sin"
    assert item["custom"] == {"problem": "remat_sin_sin"}
    assert item["lineItem"] == {"scoreMaximum": 1, "label": item["title"], "resourceId": "remat_sin_sin"}

    # a second pick gets a fresh nonce, and no data claim when the request had none
    platform.with_deep_linking(data=None)
    second = open_picker(browser, platform)
    _, _, answer = pick(browser, second.response.text, "remat_sin_sin")
    action2, fields2 = parse_form(answer.text, RETURN_FORM)  # type: ignore[attr-defined]
    assert browser.client.post(action2, data=fields2).status_code == 200
    claims2 = platform.deep_link_claims[-1]
    assert DL + "data" not in claims2 and claims2["nonce"] != claims["nonce"]


def test_the_returned_link_launched_by_a_student_lands_on_its_problem(
    server: Server, platform: Platform, browser: Browser
) -> None:
    outcome = open_picker(browser, platform)
    _, _, answer = pick(browser, outcome.response.text, "remat_sin_sin")
    action, fields = parse_form(answer.text, RETURN_FORM)  # type: ignore[attr-defined]
    assert browser.client.post(action, data=fields).status_code == 200
    [item] = platform.deep_link_claims[-1][DL + "content_items"]

    # the LMS now launches the link it stored: target_link_uri = the item's url, its custom claim
    student = Browser(server.url)
    try:
        platform.with_launch(
            sub="student-9",
            name="Sam Student",
            email="sam@lms.example",
            roles=list(STUDENT),
            problem=item["custom"]["problem"],
            target_link_uri=item["url"],
            resource_link_id="link-from-deep-linking",
        )
        landed = student.launch(platform, target_link_uri=item["url"])
        assert landed.response.status_code == 200, landed.response.text[:1000]
        assert urlsplit(str(landed.response.url)).path == "/problems/remat_sin_sin"
        assert student.signed_in()
        # the url alone (no custom claim) names the same problem
        platform.with_launch(
            sub="student-9",
            roles=list(STUDENT),
            problem=None,
            target_link_uri=item["url"],
            resource_link_id="link-from-deep-linking",
        )
        assert parse_qs(urlsplit(item["url"]).query) == {"problem": ["remat_sin_sin"]}
        landed = student.launch(platform, target_link_uri=item["url"])
        assert urlsplit(str(landed.response.url)).path == "/problems/remat_sin_sin"
    finally:
        student.close()


def test_a_student_cannot_deep_link(server: Server, platform: Platform, browser: Browser) -> None:
    platform.with_deep_linking(sub="student-2", roles=list(STUDENT))
    outcome = browser.launch(platform)
    assert outcome.response.status_code == 403
    assert "Only instructors" in outcome.response.text and PICK_FORM not in outcome.response.text
    assert not browser.signed_in()


def test_a_deep_linking_request_without_settings_is_refused(
    server: Server, platform: Platform, browser: Browser
) -> None:
    platform.with_deep_linking(deep_linking=None)
    outcome = browser.launch(platform)
    assert outcome.response.status_code == 400 and "deep_linking_settings" in outcome.response.text
    assert not browser.signed_in()
    # settings that do not accept resource links
    platform.with_deep_linking(
        deep_linking={"deep_link_return_url": platform.deep_link_return_url, "accept_types": ["file"]}
    )
    outcome = browser.launch(platform)
    assert outcome.response.status_code == 400 and "ltiResourceLink" in outcome.response.text


def test_a_deep_linking_request_gets_every_launch_check(server: Server, platform: Platform, browser: Browser) -> None:
    platform.with_deep_linking(key="other")
    assert browser.launch(platform).response.status_code == 403
    platform.with_deep_linking(aud="another-tool")
    assert browser.launch(platform).response.status_code == 403
    platform.with_deep_linking(deployment_id="deployment-unknown")
    assert browser.launch(platform).response.status_code == 403
    platform.with_deep_linking(exp_in_s=-120)
    assert browser.launch(platform).response.status_code == 403
    platform.with_deep_linking(version="1.1.0")
    assert browser.launch(platform).response.status_code == 403
    assert not browser.signed_in()


def test_a_replayed_picker_form_is_refused(server: Server, platform: Platform, browser: Browser) -> None:
    before = len(platform.deep_link_responses)
    outcome = open_picker(browser, platform)
    bindings = {c.name: c.value for c in browser.client.cookies.jar if c.name.startswith("remat_lti_dl_")}
    assert len(bindings) == 1
    [cookie_header] = [f"{name}={value}" for name, value in bindings.items()]
    action, fields = parse_form(outcome.response.text, PICK_FORM)
    _, _, first = pick(browser, outcome.response.text, "remat_sin_sin")
    assert first.status_code == 200 and RETURN_FORM in first.text  # type: ignore[attr-defined]
    # the same request again, binding cookie included (the tool deleted it from the browser)
    with httpx.Client(timeout=60) as replayer:
        again = replayer.post(
            server.url + action, data={**fields, "problem": "remat_sin_sin"}, headers={"cookie": cookie_header}
        )
    assert again.status_code == 403 and "used already" in again.text
    assert RETURN_FORM not in again.text
    # and from the instructor's browser, whose binding cookie is gone
    _, _, again = pick(browser, outcome.response.text, "remat_sin_sin")
    assert again.status_code == 403 and RETURN_FORM not in again.text  # type: ignore[attr-defined]
    assert len(platform.deep_link_responses) == before  # nothing was sent by the tool itself


def test_the_picker_form_is_bound_to_the_instructors_session(
    server: Server, platform: Platform, browser: Browser
) -> None:
    outcome = open_picker(browser, platform)
    action, fields = parse_form(outcome.response.text, PICK_FORM)
    # another browser (no session, or its own session) posting the same form
    other = Browser(server.url)
    try:
        answer = other.client.post(server.url + action, data={**fields, "problem": "remat_sin_sin"})
        assert answer.status_code == 403 and RETURN_FORM not in answer.text
        platform.with_deep_linking(sub="teacher-2")
        own = open_picker(other, platform)
        _, own_fields = parse_form(own.response.text, PICK_FORM)
        # its own CSRF token with the first instructor's context
        answer = other.client.post(
            server.url + action, data={**fields, "csrf": own_fields["csrf"], "problem": "remat_sin_sin"}
        )
        assert answer.status_code == 403 and "another browser session" in answer.text
    finally:
        other.close()
    # without the CSRF token, in the right browser
    answer = browser.client.post(server.url + action, data={"context": fields["context"], "problem": "remat_sin_sin"})
    assert answer.status_code == 403
    # an unknown problem
    answer = browser.client.post(server.url + action, data={**fields, "problem": "no_such_problem"})
    assert answer.status_code == 404
    # the form still works once (the refusals above did not spend it)
    answer = browser.client.post(server.url + action, data={**fields, "problem": "remat_sin_sin"})
    assert answer.status_code == 200 and RETURN_FORM in answer.text
