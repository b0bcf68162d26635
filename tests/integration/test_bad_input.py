"""Bad input is a 4xx, never a 500, on SQLite and on PostgreSQL (whose text columns refuse NUL):
Hypothesis draws text with lone surrogates, NUL and other control characters into every JSON field
of a submission (alone and in a batch), into paths and query strings, and into web forms. Each
answer must be below 500, say why when it is a 4xx, store nothing when it refuses, and use no
rate-limit slot. Real databases, the app through FastAPI's TestClient (no jail: nothing is graded).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.app import create_app
from server.deps import get_services
from server.settings import Settings
from tests.support import PROBLEMS
from tests.unit.test_api_admission import make_services

SOURCE = (PROBLEMS / "remat_sin_sin" / "reference.py").read_text()
# any code point: lone surrogates (which JSON can spell as "\ud800") and NUL included
HOSTILE = st.one_of(
    st.characters(),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.just("\x00"),
    st.characters(max_codepoint=0x1F),
)
TEXT = st.text(alphabet=HOSTILE, max_size=40)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(params=["sqlite", "postgresql"])
def app(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'judge.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    config = Settings(
        data_dir=tmp_path,
        problems_dir=PROBLEMS,
        hidden_seed="fuzz",
        rate_limit="1000/minute",
        allow_anonymous_api=False,
        signin_failures_per_ip="",
        signin_failures_per_account="",
    )
    services = make_services(config, url)
    app = create_app(config)
    app.dependency_overrides[get_services] = lambda: services
    _, key = services.clients.create("fuzzer", callback_allow=["https://lms.example/hooks/"])
    client = TestClient(app, raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {key}"
    yield client, services
    services.engine.dispose()


def _post_json(client: TestClient, path: str, body: object):  # type: ignore[no-untyped-def]
    # ensure_ascii: a lone surrogate goes on the wire as the JSON escape \\udXXX, as an attacker sends it
    return client.post(
        path, content=json.dumps(body, ensure_ascii=True).encode(), headers={"content-type": "application/json"}
    )


def _rows(services) -> int:  # type: ignore[no-untyped-def]
    return sum(services.reports.count_by_status().values())


def _unstorable(text: str | None) -> bool:
    return text is not None and ("\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text))


def test_json_fields_of_a_submission(app) -> None:  # type: ignore[no-untyped-def]
    client, services = app

    @FUZZ
    @given(field=st.sampled_from(["problem", "source", "external_id", "callback_url"]), text=TEXT)
    def run(field: str, text: str) -> None:
        body = {
            "problem": "remat_sin_sin",
            "source": SOURCE,
            "external_id": "ext-1",
            "callback_url": "https://lms.example/hooks/1",
        }
        body[field] = text
        before = _rows(services)
        answer = _post_json(client, "/api/v1/submissions", body)
        assert answer.status_code < 500, answer.text
        if answer.status_code >= 400:
            assert answer.json()["detail"] and _rows(services) == before
        if _unstorable(text):
            assert answer.status_code == 422 and field in answer.json()["detail"]
        batch = _post_json(client, "/api/v1/submissions/batch", {"submissions": [body, {**body, field: "ok"}]})
        assert batch.status_code < 500, batch.text
        if _unstorable(text):
            assert batch.status_code == 202 and batch.json()["items"][0]["error"] == 422

    run()


def test_paths_and_query_strings(app) -> None:  # type: ignore[no-untyped-def]
    client, services = app

    @FUZZ
    @given(text=TEXT, number=st.integers(min_value=-(10**40), max_value=10**40))
    def run(text: str, number: int) -> None:
        segment = quote(text.encode("utf-8", "surrogatepass"), safe="")
        for path in (
            f"/api/v1/submissions/{segment}",
            f"/submissions/{segment}",
            f"/submissions/{segment}/source.py",
            f"/problems/{segment}",
            f"/api/v1/problems/{segment}",
            f"/instructor/courses/{segment}",
            f"/api/v1/submissions?external_id={segment}",
            f"/api/v1/submissions/batch?ids={segment}",
            f"/instructor/regrades/{number}",
            f"/signin?next={segment}",
        ):
            for accept in ("application/json", "text/html"):
                answer = client.get(path, headers={"accept": accept}, follow_redirects=False)
                assert answer.status_code < 500, (path, answer.status_code, answer.text[:300])
                if answer.status_code in (301, 302, 303, 307):
                    answer.headers["location"].encode("ascii")  # a Location header is ASCII

    run()
    assert _rows(services) == 0


def test_web_forms(app) -> None:  # type: ignore[no-untyped-def]
    client, services = app
    page = client.get("/signup").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]

    @FUZZ
    @given(email=TEXT, name=TEXT, password=TEXT)
    def run(email: str, name: str, password: str) -> None:
        for path in ("/signup", "/signin"):
            form = {"email": email, "display_name": name, "password": password, "csrf_token": token}
            encoded = "&".join(f"{k}={quote(v.encode('utf-8', 'surrogatepass'), safe='')}" for k, v in form.items())
            answer = client.post(
                path,
                content=encoded.encode(),
                follow_redirects=False,
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            assert answer.status_code < 500, (path, answer.text[:300])
            if "\x00" in email + name + password:
                assert answer.status_code == 422

    run()
    assert all("\x00" not in u.email + u.display_name for u in services.users.all())


def test_a_refused_submission_uses_no_rate_limit_slot(tmp_path: Path) -> None:
    config = Settings(
        data_dir=tmp_path, problems_dir=PROBLEMS, hidden_seed="fuzz", rate_limit="2/minute", allow_anonymous_api=True
    )
    services = make_services(config, f"sqlite:///{tmp_path / 'judge.db'}")
    app = create_app(config)
    app.dependency_overrides[get_services] = lambda: services
    client = TestClient(app)
    body = {"problem": "remat_sin_sin", "source": SOURCE}
    for bad in ({"external_id": "\ud800"}, {"source": "x = '\x00'"}, {"callback_url": "https://x/\ud800"}):
        assert _post_json(client, "/api/v1/submissions", {**body, **bad}).status_code == 422
    assert [_post_json(client, "/api/v1/submissions", body).status_code for _ in range(3)] == [202, 202, 429]
