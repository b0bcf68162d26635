"""LTI endpoints under load and inside an LMS's iframe, fast (TestClient, real SQLite): past
`REMAT_JUDGE_LTI_RATE_LIMIT` an address gets 429 with Retry-After and nothing stored; the session
cookie is SameSite=None; Secure behind HTTPS (so it comes back inside the LMS's iframe) and Lax
without."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.api.deps import get_services
from server.app import create_app
from server.lti.models import LtiLogin, LtiStore
from server.lti.routes import LtiService
from server.settings import Settings
from tests.support import PROBLEMS
from tests.unit.test_api_admission import make_services


def make(tmp_path: Path, **settings: object) -> tuple[TestClient, object]:
    config = Settings(data_dir=tmp_path, problems_dir=PROBLEMS, hidden_seed="unit", **settings)  # type: ignore[arg-type]
    services = make_services(config, f"sqlite:///{tmp_path / 'judge.db'}")
    engine = services.engine
    app = create_app(config)
    app.dependency_overrides[get_services] = lambda: services
    app.state.lti = LtiService.start(engine, config)  # the lifespan (grading threads) does not run
    LtiStore(engine).register(issuer="https://lms.example", client_id="c1", deployment_ids=["d1"],
                              auth_login_url="https://lms.example/auth", auth_token_url="https://lms.example/token",
                              keyset_url="https://lms.example/jwks")
    return TestClient(app, base_url="https://testserver"), engine


LOGIN = {"iss": "https://lms.example", "login_hint": "u1", "target_link_uri": "https://testserver/lti/launch"}


def test_logins_past_the_limit_get_429_with_retry_after_and_store_nothing(tmp_path: Path) -> None:
    client, engine = make(tmp_path, lti_rate_limit="3/minute")
    answers = [client.get("/lti/login", params=LOGIN, follow_redirects=False) for _ in range(5)]
    assert [a.status_code for a in answers] == [302, 302, 302, 429, 429]
    assert 1 <= int(answers[3].headers["retry-after"]) <= 60
    assert "too many LTI requests" in answers[3].text
    with Session(engine) as session:  # type: ignore[arg-type]
        assert session.execute(select(func.count()).select_from(LtiLogin)).scalar_one() == 3
    assert client.post("/lti/launch", data={"state": "x", "id_token": "y"}).status_code == 429
    assert client.get("/lti/jwks").status_code == 200  # the public keys are never limited


def test_no_limit_when_empty(tmp_path: Path) -> None:
    client, _ = make(tmp_path, lti_rate_limit="")
    assert {client.get("/lti/login", params=LOGIN, follow_redirects=False).status_code for _ in range(80)} == {302}


def _session_cookie(client: TestClient) -> str:
    import re

    page = client.get("/signin")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    assert token
    return next(h for h in page.headers.get_list("set-cookie") if h.startswith("remat_session="))


def test_the_session_cookie_is_samesite_none_and_secure_behind_https(tmp_path: Path) -> None:
    client, engine = make(tmp_path, cookie_secure=True)
    from tests.unit.test_api_admission import make_client

    _, services = make_client(tmp_path / "svc")
    client.app.state.services = services  # type: ignore[attr-defined]  # pages read accounts from here
    cookie = _session_cookie(client).lower()
    assert "samesite=none" in cookie and "secure" in cookie and "httponly" in cookie


def test_the_session_cookie_is_lax_without_https(tmp_path: Path) -> None:
    client, _ = make(tmp_path)
    from tests.unit.test_api_admission import make_client

    _, services = make_client(tmp_path / "svc")
    client.app.state.services = services  # type: ignore[attr-defined]
    cookie = _session_cookie(client).lower()
    assert "samesite=lax" in cookie and "secure" not in cookie
