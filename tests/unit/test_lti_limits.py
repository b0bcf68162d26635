"""LTI endpoints under load and inside an LMS's iframe, fast (TestClient, real SQLite): past
`REMAT_JUDGE_LTI_RATE_LIMIT` an address gets 429 with Retry-After and nothing stored; the session
cookie is SameSite=None; Secure behind HTTPS (so it comes back inside the LMS's iframe) and Lax
without."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.app import create_app
from server.deps import get_services
from server.runtime import build_lti
from server.settings import Settings
from server.store.lti import LtiLogin
from server.store.lti_store import LtiStore
from tests.support import PROBLEMS
from tests.unit.test_api_admission import make_services


def make(tmp_path: Path, **settings: object) -> tuple[TestClient, object]:
    config = Settings(data_dir=tmp_path, problems_dir=PROBLEMS, hidden_seed="unit", **settings)  # type: ignore[arg-type]
    services = make_services(config, f"sqlite:///{tmp_path / 'judge.db'}")
    engine = services.engine
    app = create_app(config)
    app.dependency_overrides[get_services] = lambda: services
    services.lti = build_lti(config, engine)  # the lifespan (grading threads) does not run
    LtiStore(engine).register(
        issuer="https://lms.example",
        client_id="c1",
        deployment_ids=["d1"],
        auth_login_url="https://lms.example/auth",
        auth_token_url="https://lms.example/token",
        keyset_url="https://lms.example/jwks",
    )
    return TestClient(app, base_url="https://testserver"), engine


LOGIN = {"iss": "https://lms.example", "login_hint": "u1", "target_link_uri": "https://testserver/lti/launch"}


def test_launches_past_the_limit_get_429_with_retry_after_and_store_nothing(tmp_path: Path) -> None:
    client, engine = make(tmp_path, lti_rate_limit="3/minute")
    answers = [client.get("/lti/login", params=LOGIN, follow_redirects=False) for _ in range(5)]
    assert [a.status_code for a in answers] == [302, 302, 302, 429, 429]
    assert 1 <= int(answers[3].headers["retry-after"]) <= 60
    assert "too many LTI launches" in answers[3].text
    with Session(engine) as session:  # type: ignore[arg-type]
        assert session.execute(select(func.count()).select_from(LtiLogin)).scalar_one() == 3
    # a launch is counted once, at its login: its POST and landing are not counted again
    assert client.post("/lti/launch", data={"state": "x", "id_token": "y"}).status_code == 403
    assert client.get("/lti/jwks").status_code == 200  # the public keys are never limited


def test_a_platforms_launches_are_counted_together(tmp_path: Path) -> None:
    client, _ = make(tmp_path, lti_rate_limit="", lti_platform_rate_limit="2/minute")
    codes = [client.get("/lti/login", params=LOGIN, follow_redirects=False).status_code for _ in range(3)]
    assert codes == [302, 302, 429]


def test_no_limit_when_empty(tmp_path: Path) -> None:
    client, _ = make(tmp_path, lti_rate_limit="", lti_platform_rate_limit="")
    assert {client.get("/lti/login", params=LOGIN, follow_redirects=False).status_code for _ in range(80)} == {302}


def test_lti_over_plain_http_is_refused_unless_local(tmp_path: Path) -> None:
    client, _ = make(tmp_path)
    plain = TestClient(client.app, base_url="http://judge.example.org")
    refused = plain.get("/lti/login", params=LOGIN, follow_redirects=False)
    assert refused.status_code == 503 and "REMAT_JUDGE_PUBLIC_URL=https://" in refused.text
    assert (
        TestClient(client.app, base_url="http://127.0.0.1:8000")
        .get("/lti/login", params=LOGIN, follow_redirects=False)
        .status_code
        == 302
    )  # a local test
    allowed, _ = make(tmp_path / "allowed", lti_allow_http=True)
    assert (
        TestClient(allowed.app, base_url="http://judge.example.org")
        .get("/lti/login", params=LOGIN, follow_redirects=False)
        .status_code
        == 302
    )
    behind, _ = make(tmp_path / "proxied", public_url="https://judge.example.org")
    login = TestClient(behind.app, base_url="http://10.0.0.9:8000").get(
        "/lti/login", params=LOGIN, follow_redirects=False
    )
    assert (
        login.status_code == 302
        and "redirect_uri=https%3A%2F%2Fjudge.example.org%2Flti%2Flaunch" in login.headers["location"]
    )
    state_cookie = next(h for h in login.headers.get_list("set-cookie") if h.startswith("remat_lti_state_")).lower()
    assert "samesite=none" in state_cookie and "secure" in state_cookie


def _session_cookie(client: TestClient) -> str:
    import re

    page = client.get("/signin")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    assert token
    return next(h for h in page.headers.get_list("set-cookie") if h.startswith("remat_session="))


def _cookie_of(tmp_path: Path, base_url: str, **settings: object) -> str:
    client, _ = make(tmp_path, **settings)
    return _session_cookie(TestClient(client.app, base_url=base_url)).lower()


def test_cookies_are_secure_by_the_url(tmp_path: Path) -> None:
    """SameSite=None; Secure (what comes back inside an LMS's iframe) whenever the judge is reached
    over HTTPS: its public URL, or the request's own scheme (a trusted proxy's X-Forwarded-Proto);
    Lax on plain HTTP, where browsers drop SameSite=None cookies."""
    for name, base, settings in (
        ("https-request", "https://judge.example.org", {}),
        ("https-public-url", "http://10.0.0.9", {"public_url": "https://judge.example.org"}),
        ("forced", "http://127.0.0.1", {"cookie_secure": True}),
    ):
        cookie = _cookie_of(tmp_path / name, base, **settings)
        assert "samesite=none" in cookie and "; secure" in cookie and "httponly" in cookie, (name, cookie)
    cookie = _cookie_of(tmp_path / "plain", "http://127.0.0.1:8000")
    assert "samesite=lax" in cookie and "secure" not in cookie
