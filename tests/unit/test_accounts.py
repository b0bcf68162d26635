"""Accounts through the web pages, fast (TestClient, real SQLite): server-side sessions that sign-out,
the sessions page and a password reset end at once (a copied cookie too); no account enumeration
at sign-in (same status, same body, the same argon2 work); sign-in throttling per account and per
IP; sign-up that does not confirm a taken email."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from server.web import sessions
from tests.support import remat_judge
from tests.unit.test_course_pages import Site

PASSWORD = "pw-123456"


@pytest.fixture
def site(tmp_path: Path) -> Site:
    s = Site(tmp_path)
    s.account("ada@uni.example", "Ada")
    return s


def signed_in_as(client: TestClient) -> str | None:
    match = re.search(r'class="who"[^>]*title="([^"]+)"', client.get("/").text)
    return match.group(1) if match else None


def csrf_of(client: TestClient, path: str = "/signin") -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text).group(1)  # type: ignore[union-attr]


def sign_in(client: TestClient, email: str, password: str = PASSWORD):  # type: ignore[no-untyped-def]
    return client.post(
        "/signin", data={"email": email, "password": password, "csrf_token": csrf_of(client)}, follow_redirects=False
    )


def test_signing_out_ends_the_session_for_a_copied_cookie_too(site: Site) -> None:
    assert sign_in(site.client, "ada@uni.example").status_code == 303
    stolen = site.client.cookies.get("remat_session")
    assert stolen and signed_in_as(site.client) == "ada@uni.example"
    site.client.post("/signout", data={"csrf_token": csrf_of(site.client, "/")})
    assert signed_in_as(site.client) is None
    thief = TestClient(site.client.app)
    thief.cookies.set("remat_session", stolen)
    assert signed_in_as(thief) is None  # the signed cookie is still valid; its session is not


def test_the_sessions_page_ends_another_browser(site: Site) -> None:
    phone = TestClient(site.client.app)
    assert sign_in(phone, "ada@uni.example").status_code == 303
    assert sign_in(site.client, "ada@uni.example").status_code == 303
    page = site.client.get("/account/sessions").text
    assert page.count("<tr><td>") == 2 and "this one" in page
    other = re.search(r'name="key" value="([0-9a-f]{64})"', page).group(1)  # type: ignore[union-attr]
    site.client.post("/account/sessions/end", data={"key": other, "csrf_token": csrf_of(site.client, "/")})
    assert signed_in_as(phone) is None and signed_in_as(site.client) == "ada@uni.example"
    assert (
        site.client.post(
            "/account/sessions/end", data={"key": other, "csrf_token": csrf_of(site.client, "/")}
        ).status_code
        == 404
    )  # ended already (and never another account's)
    assert site.client.post("/account/sessions/end", data={"key": "others"}).status_code == 403  # no CSRF token


def test_sign_in_answers_alike_for_unknown_emails_and_wrong_passwords(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same answer, and the same work: every sign-in verifies exactly one hash, made with the
    same parameters whether the email is known or not (before, an unknown email verified none: 4 ms
    against 128 ms). Counted, not timed, so the test does not depend on the machine's load."""
    verified: list[str] = []
    real = sessions.verify_password

    def counting(password: str, password_hash: str) -> tuple[bool, str | None]:
        verified.append(password_hash.rsplit("$", 2)[0])  # the algorithm and its cost parameters
        return real(password, password_hash)

    monkeypatch.setattr(sessions, "verify_password", counting)
    answers = {}
    work: dict[str, list[str]] = {}
    for kind, email in (("known", "ada@uni.example"), ("unknown", "nobody@uni.example")):
        token = csrf_of(site.client)
        verified.clear()
        answer = site.client.post("/signin", data={"email": email, "password": "wrong-password", "csrf_token": token})
        answers[kind] = (answer.status_code, answer.text.replace(email, "EMAIL").replace(token, "T"))
        work[kind] = list(verified)
    assert answers["known"] == answers["unknown"] and answers["known"][0] == 401
    assert len(work["known"]) == len(work["unknown"]) == 1
    assert work["known"] == work["unknown"] and work["known"][0].startswith("$argon2")


def test_sign_up_does_not_confirm_a_taken_email(site: Site) -> None:
    def signup(email: str, password: str) -> tuple[int, str]:
        client = TestClient(site.client.app)
        token = csrf_of(client, "/signup")
        answer = client.post(
            "/signup",
            data={"email": email, "display_name": "X", "password": password, "csrf_token": token},
            follow_redirects=False,
        )
        return answer.status_code, answer.text

    taken = signup("ada@uni.example", "another-password-1")
    assert taken[0] == 422 and "No account was made with these details" in taken[1] and "exists" not in taken[1]
    from server.web.sessions import hash_password

    site.users.create(email="eve@uni.example", display_name="Eve", password_hash=hash_password("eve-password-1"))
    # sign-up never signs in to an existing account, even with its password: it would be a password
    # check outside the sign-in throttle
    assert signup("eve@uni.example", "eve-password-1")[0] == 422
    assert signup("new@uni.example", "a-new-password")[0] == 303


def test_sign_up_is_no_way_around_the_sign_in_throttle(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.account("ada@uni.example", "Ada")
    site.services.settings = site.services.settings.model_copy(
        update={"signin_failures_per_account": "3 per 15 minutes", "signin_failures_per_ip": "20 per 15 minutes"}
    )
    assert [sign_in(site.client, "ada@uni.example", "wrong-password").status_code for _ in range(4)] == [
        401,
        401,
        401,
        429,
    ]
    token = csrf_of(site.client, "/signup")
    answers = [
        site.client.post(
            "/signup",
            data={"email": "ada@uni.example", "display_name": "X", "password": password, "csrf_token": token},
            follow_redirects=False,
        )
        for password in [f"guess-number-{i}" for i in range(12)] + [PASSWORD]
    ]
    assert {a.status_code for a in answers} == {429}  # the right password last: refused unchecked too
    assert all(1 <= int(a.headers["retry-after"]) <= 900 for a in answers)
    assert signed_in_as(site.client) is None
    # refused sign-ups of a taken email count against the address like failed sign-ins
    other = Site(tmp_path / "other")
    other.account("bo@uni.example", "Bo")
    other.services.settings = other.services.settings.model_copy(
        update={"signin_failures_per_account": "", "signin_failures_per_ip": "3 per 15 minutes"}
    )
    token = csrf_of(other.client, "/signup")
    codes = [
        other.client.post(
            "/signup",
            data={"email": "bo@uni.example", "display_name": "X", "password": "some-password-1", "csrf_token": token},
        ).status_code
        for _ in range(4)
    ]
    assert codes == [422, 422, 422, 429]
    assert sign_in(other.client, "bo@uni.example").status_code == 429


def test_sign_in_is_throttled_per_account_and_per_ip(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.account("ada@uni.example", "Ada")
    site.services.settings = site.services.settings.model_copy(
        update={"signin_failures_per_account": "3 per 15 minutes", "signin_failures_per_ip": "5 per 15 minutes"}
    )
    codes = [sign_in(site.client, "ada@uni.example", "wrong-password").status_code for _ in range(4)]
    assert codes == [401, 401, 401, 429]
    refused = sign_in(site.client, "ada@uni.example")  # even the right password is not checked now
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 900
    assert "Too many failed sign-ins" in refused.text
    # other emails from the same address: the IP's limit (5 failures) stops them too
    codes = [sign_in(site.client, f"guess{i}@uni.example", "wrong-password").status_code for i in range(3)]
    assert codes == [401, 401, 429]


def test_an_instructor_resets_a_password_and_every_session_ends(site: Site, tmp_path: Path) -> None:
    assert sign_in(site.client, "ada@uni.example").status_code == 303
    env = {**os.environ, "REMAT_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'judge.db'}"}  # make_client's database
    done = remat_judge("users", "reset-password", "ada@uni.example", "--data-dir", str(tmp_path), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    new_password = done.stdout.strip().splitlines()[-1]
    assert "1 session(s) ended" in done.stdout and len(new_password) >= 16
    assert signed_in_as(site.client) is None
    assert sign_in(site.client, "ada@uni.example").status_code == 401  # the old password is gone
    assert sign_in(site.client, "ada@uni.example", new_password).status_code == 303
    missing = remat_judge("users", "reset-password", "nobody@uni.example", "--data-dir", str(tmp_path), env=env)
    assert missing.returncode == 2 and "no account" in missing.stderr


def test_an_account_without_a_password_never_signs_in_and_answers_like_a_wrong_password(site: Site) -> None:
    """LTI accounts have no password (`NO_PASSWORD`, not a hash): signing in with their email and
    any password, the marker itself included, is the same 401 as a wrong password."""
    from server.store.accounts import NO_PASSWORD

    site.users.create(email="lti-0123@lti.invalid", display_name="Launch Only", password_hash=NO_PASSWORD)
    for password in ("", "pw-123456", NO_PASSWORD, "no-password"):
        answer = sign_in(site.client, "lti-0123@lti.invalid", password)
        assert answer.status_code == 401 and signed_in_as(site.client) is None
    wrong = sign_in(site.client, "ada@uni.example", "wrong-password")
    assert wrong.status_code == 401 and wrong.text.replace("ada@uni.example", "lti-0123@lti.invalid") == answer.text
