"""LTI Names and Role Provisioning Services 2.0 (server/lti/nrps.py), fast: the membership
container parser and the paging links on their own; the roster sync button through FastAPI's
TestClient on real SQLite, against the simulated platform's memberships endpoint and the
simulated gradebook's token endpoint (both real HTTP servers on loopback); the gradebook and its
CSV with roster students who never launched or never submitted."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.courses.gradebook import NEVER_LAUNCHED, NO_SUBMISSION
from server.lti.ags import AgsClient
from server.lti.launch import CLAIM_NRPS, memberships_url_of
from server.lti.nrps import (
    SCOPE_MEMBERSHIPS,
    Limits,
    NoRosterService,
    RosterError,
    fetch_members,
    next_page,
    parse_container,
    sync_course,
)
from server.runtime import build_lti
from server.store.accounts import SiteRole, UserStore
from server.store.course_store import CourseStore
from server.store.courses import Course, CourseRole
from server.store.lti_store import LtiStore
from server.web.sessions import hash_password
from tests.lti_gradebook import Gradebook
from tests.lti_platform import INSTRUCTOR, LIS, STUDENT, TEACHING_ASSISTANT, Platform
from tests.unit.test_api_admission import make_client

PASSWORD = "pw-123456"


def container(*members: dict[str, Any]) -> bytes:
    return json.dumps(
        {"id": "https://lms.example/m", "context": {"id": "c1", "title": "Course"}, "members": list(members)}
    ).encode()


# --- the membership container ----------------------------------------------------------------------


def test_a_membership_container_is_read_member_by_member() -> None:
    members = parse_container(
        container(
            {
                "user_id": "u-ada",
                "name": "Ada Lovelace",
                "email": "Ada@Uni.Example",
                "roles": STUDENT,
                "status": "Active",
                "picture": "https://lms.example/ada.png",
            },
            {"user_id": "u-bob", "given_name": "Bob", "family_name": "Stone", "roles": [LIS + "membership#Learner"]},
            {"user_id": "u-pat", "name": "Pat Prof", "roles": INSTRUCTOR},
            {"user_id": "u-tia", "name": "Tia TA", "roles": TEACHING_ASSISTANT, "status": "Active"},
            {"user_id": "u-cy", "name": "Cy Gone", "roles": ["Learner", 7, None], "status": "Inactive"},
            {"user_id": "u-del", "roles": STUDENT, "status": "Deleted"},
        )
    )
    by_id = {m.user_id: m for m in members}
    assert [m.user_id for m in members] == ["u-ada", "u-bob", "u-pat", "u-tia", "u-cy", "u-del"]
    ada = by_id["u-ada"]
    assert (ada.name, ada.email, ada.roles, ada.active, ada.staff) == (
        "Ada Lovelace",
        "ada@uni.example",  # lower-cased, as a launch's email is
        tuple(STUDENT),
        True,
        False,
    )
    assert by_id["u-bob"].name == "Bob Stone" and by_id["u-bob"].email is None
    assert by_id["u-bob"].active  # no status: Active (the spec's default)
    assert by_id["u-pat"].staff and by_id["u-tia"].staff  # Instructor and its sub-roles are staff
    assert by_id["u-cy"].roles == ("Learner",) and not by_id["u-cy"].active and not by_id["u-cy"].staff
    assert not by_id["u-del"].active
    assert parse_container(container()) == []


@pytest.mark.parametrize(
    "body, message",
    [
        (b"<html>Service Unavailable</html>", "is not JSON"),
        (b"\xff\xfe{}", "is not JSON"),
        (b"[]", 'no list of members (its "members" field is missing)'),
        (b'{"id": "x"}', "no list of members"),
        (b'{"members": {"u": 1}}', "no list of members"),
        (container("u-ada"), "Member 1 of the LMS's roster is not an object"),  # type: ignore[arg-type]
        (
            container({"user_id": "u-ada"}, {"name": "No Id", "roles": STUDENT}),
            "Member 2 of the LMS's roster has no usable user_id",
        ),
        (container({"user_id": ""}), "Member 1 of the LMS's roster has no usable user_id"),
        (container({"user_id": 42}), "no usable user_id"),
        (container({"user_id": "x" * 256}), "no usable user_id"),
        (container({"user_id": "u\x00"}), "no usable user_id"),
        (container({"user_id": "u-ada", "roles": "Learner"}), "roles that are not a list"),
    ],
)
def test_bad_containers_are_refused_with_a_reason(body: bytes, message: str) -> None:
    with pytest.raises(RosterError, match=re.escape(message)):
        parse_container(body)


def test_the_next_page_comes_from_the_link_header() -> None:
    base = "https://lms.example/api/memberships?page=1"
    assert next_page([], base) is None
    assert next_page(['<https://lms.example/api/memberships?page=2>; rel="next"'], base) == (
        "https://lms.example/api/memberships?page=2"
    )
    assert next_page(["</api/memberships?page=2>; rel=next"], base) == "https://lms.example/api/memberships?page=2"
    canvas = (
        '<https://lms.example/m?page=1>; rel="current",<https://lms.example/m?page=2>; rel="next",'
        '<https://lms.example/m?page=1>; rel="first", <https://lms.example/m?page=9>; rel="last"'
    )
    assert next_page([canvas], base) == "https://lms.example/m?page=2"
    assert next_page(
        ['<https://lms.example/m?page=1>; rel="first"', '<https://lms.example/m?page=3>; rel="next"'], base
    ) == ("https://lms.example/m?page=3")
    assert next_page(['<https://lms.example/m?page=9>; rel="last"'], base) is None
    assert next_page(['<https://lms.example/m?diff=1>; rel="differences"'], base) is None


def test_the_launch_claim_names_the_memberships_url() -> None:
    url = "https://lms.example/api/lti/courses/1/names_and_roles"
    assert memberships_url_of({CLAIM_NRPS: {"context_memberships_url": url, "service_versions": ["2.0"]}}) == url
    assert memberships_url_of({CLAIM_NRPS: {"context_memberships_url": url, "service_versions": ["1.0", "2.0"]}}) == url
    assert memberships_url_of({}) is None
    assert memberships_url_of({CLAIM_NRPS: {"context_memberships_url": url, "service_versions": ["1.0"]}}) is None
    assert memberships_url_of({CLAIM_NRPS: {"context_memberships_url": url}}) is None
    assert (
        memberships_url_of({CLAIM_NRPS: {"context_memberships_url": "javascript:x", "service_versions": ["2.0"]}})
        is None
    )
    assert memberships_url_of({CLAIM_NRPS: {"context_memberships_url": 3, "service_versions": ["2.0"]}}) is None
    assert memberships_url_of({CLAIM_NRPS: "https://lms.example/m"}) is None


# --- the sync through the course page, against the simulated LMS -----------------------------------


class Lms:
    """The simulated platform (memberships) and gradebook (tokens), the judge's app with the
    platform registered, an LMS course with its memberships URL, its staff Pat (signed in) and the
    student Ada, who launched."""

    def __init__(self, tmp_path: Path):
        self.client, self.services = make_client(tmp_path)
        engine = self.services.engine
        service = build_lti(self.services.settings, engine)
        service.client = AgsClient(timeout_s=5, allow_networks=["127.0.0.0/8"])
        self.services.lti = service
        self.service = service
        self.platform = Platform(client_id="nrps-unit")
        self.book = Gradebook(jwks=service.key.jwks(), client_id=self.platform.client_id).start()
        self.platform.token_check = self.book.grants
        self.lti = LtiStore(engine)
        registered = self.lti.register(
            issuer=self.platform.issuer,
            client_id=self.platform.client_id,
            deployment_ids=["deployment-1"],
            auth_login_url=f"{self.platform.url}/auth",
            auth_token_url=self.book.token_url,
            keyset_url=f"{self.platform.url}/jwks",
        )
        self.courses = CourseStore(engine)
        users = UserStore(engine)
        self.pat = users.create(
            email="pat@uni.example", display_name="Pat", password_hash=hash_password(PASSWORD), role=SiteRole.USER
        )
        ada = self.lti.account_for(
            issuer=self.platform.issuer, sub="u-ada", name="Ada", email="ada@uni.example", role=CourseRole.STUDENT
        )
        self.course: Course = self.courses.join_context(
            platform_id=registered.id,
            deployment_id="deployment-1",
            context_id="course-42",
            title="JAX course",
            user_id=ada.id,
            member_id="u-ada",
            role=CourseRole.STUDENT,
        )
        self.ada_id = ada.id
        self.courses.enroll(self.course.id, self.pat.id, CourseRole.STAFF)
        self.courses.ensure_assignment(self.course.id, "checkpoint_dot_policy")
        self.lti.save_memberships_url(
            platform_id=registered.id,
            deployment_id="deployment-1",
            context_id="course-42",
            url=self.platform.memberships_url,
        )
        page = self.client.get("/signin").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        answer = self.client.post(
            "/signin",
            data={"email": "pat@uni.example", "password": PASSWORD, "csrf_token": token},
            follow_redirects=False,
        )
        assert answer.status_code == 303, answer.text

    def close(self) -> None:
        self.book.stop()
        self.platform.close()

    def sync(self) -> Any:
        page = self.client.get(f"/instructor/courses/{self.course.key}").text
        form = page.split('id="roster-sync"')[1]
        token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
        return self.client.post(f"/instructor/courses/{self.course.key}/roster", data={"csrf_token": token})

    def csv_rows(self) -> list[dict[str, str]]:
        text = self.client.get(f"/instructor/courses/{self.course.key}/gradebook.csv").text
        return list(csv.DictReader(io.StringIO(text)))


ROSTER = [
    {"user_id": "u-pat", "name": "Pat", "email": "pat@uni.example", "roles": INSTRUCTOR},
    {"user_id": "u-ada", "name": "Ada", "email": "ada@uni.example", "roles": STUDENT},
    {"user_id": "u-bob", "name": "Bob Never", "email": "bob@uni.example", "roles": STUDENT},
    {"user_id": "u-tia", "name": "Tia TA", "roles": TEACHING_ASSISTANT},
    {"user_id": "u-cy", "name": "Cy Dropped", "roles": STUDENT, "status": "Inactive"},
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lms]:
    made = Lms(tmp_path_factory.mktemp("nrps"))
    yield made
    made.close()


@pytest.fixture
def lms(world: Lms) -> Lms:
    """The module's world with the platform's roster as it starts and nothing synced yet."""
    world.platform.roster = [dict(m) for m in ROSTER]
    world.platform.roster_page_size = 2
    world.platform.roster_script.clear()
    world.platform.roster_requests.clear()
    world.courses.replace_roster(world.course.id, [])
    return world


def text(answer: Any) -> str:
    """A page's text as a person reads it (entities such as &#39; unescaped)."""
    return html.unescape(answer.text)


def test_the_button_syncs_every_page_and_the_gradebook_lists_who_never_launched(lms: Lms) -> None:
    before = {r["name"]: r["status"] for r in lms.csv_rows()}
    assert before == {"Ada": NO_SUBMISSION}  # before a sync: only who launched
    answer = lms.sync()
    assert answer.status_code == 200, answer.text
    assert (
        "Synced the roster from the LMS: 5 members (2 students, 2 staff, 1 inactive); 1 student never launched."
        in text(answer)
    )
    assert len(lms.platform.roster_requests) == 3  # 2 members a page, rel="next" followed twice
    first = lms.platform.roster_requests[0]
    assert first["accept"] == "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
    assert first["authorization"].startswith("Bearer ")
    assert lms.book.token_requests[-1]["scope"] == SCOPE_MEMBERSHIPS
    # staff (Instructor, TA) and the inactive student are no students of the gradebook
    assert {r["name"]: (r["status"], r["problem"]) for r in lms.csv_rows()} == {
        "Ada": (NO_SUBMISSION, "checkpoint_dot_policy"),
        "Bob Never": (NEVER_LAUNCHED, "checkpoint_dot_policy"),
    }
    page = lms.client.get(f"/instructor/courses/{lms.course.key}").text
    assert "Bob Never" in page and "never launched" in page and "Tia TA" not in page and "Cy Dropped" not in page
    assert "Last synced" in page and "3 students" not in page and "2 students" in page
    stored = {m.member_id: (m.user_id, m.staff, m.active) for m in lms.courses.roster(lms.course.id)}
    assert stored["u-ada"] == (lms.ada_id, False, True) and stored["u-bob"] == (None, False, True)
    assert stored["u-tia"][1] and not stored["u-cy"][2]

    # Ada submits: her status clears; Bob launches: he is a student of the course, no longer "never launched"
    lms.services.submissions.create(problem="checkpoint_dot_policy", source="x = 1", user_id=lms.ada_id)
    bob = lms.lti.account_for(
        issuer=lms.platform.issuer, sub="u-bob", name="Bob Never", email="bob@uni.example", role=CourseRole.STUDENT
    )
    assert lms.course.platform_id is not None and lms.course.deployment_id and lms.course.context_id
    lms.courses.join_context(
        platform_id=lms.course.platform_id,
        deployment_id=lms.course.deployment_id,
        context_id=lms.course.context_id,
        title=None,
        user_id=bob.id,
        member_id="u-bob",
        role=CourseRole.STUDENT,
    )
    rows = {r["name"]: r for r in lms.csv_rows()}
    assert rows["Ada"]["status"] == "" and rows["Ada"]["attempts"] == "0"  # submitted, not graded yet
    assert rows["Bob Never"]["status"] == NO_SUBMISSION and rows["Bob Never"]["email"] == "bob@uni.example"


@pytest.mark.parametrize(
    "script, message",
    [
        ([(500, '{"message": "database is down"}')], "The LMS answered 500 for its roster: database is down"),
        ([(200, "<html>oops</html>")], "The LMS's roster is not JSON"),
        ([(200, '{"id": "x"}')], 'no list of members (its "members" field is missing)'),
        ([(200, '{"members": [{"name": "Nobody"}]}')], "Member 1 of the LMS's roster has no usable user_id"),
        ([(403, '{"error": "insufficient_scope"}')], "does not let the judge read this course's roster (403)"),
        ([(302, "")], "a redirect, for its roster"),
    ],
)
def test_a_platform_error_is_a_message_and_the_roster_is_kept(lms: Lms, script: list, message: str) -> None:
    assert lms.sync().status_code == 200
    kept = lms.csv_rows()
    lms.platform.roster_script = list(script)
    answer = lms.sync()
    assert answer.status_code == 502, answer.text
    assert message in text(answer) and "the roster from the last sync is kept" in text(answer)
    assert lms.csv_rows() == kept


def test_a_refused_token_is_fetched_again_once(lms: Lms) -> None:
    lms.platform.roster_script = [(401, '{"error": "expired"}')]  # a cached token the platform dropped
    assert lms.sync().status_code == 200
    fetched = len(lms.book.token_requests)
    lms.platform.roster_script = [(401, '{"error": "no"}'), (401, '{"error": "still no"}')]
    answer = lms.sync()
    assert answer.status_code == 502 and "refused the judge's access token for its roster (401): still no" in text(
        answer
    )
    assert len(lms.book.token_requests) == fetched + 1


def test_no_roster_service_is_said_before_any_request(lms: Lms) -> None:
    other = lms.courses.create("made-here", "Made here")
    lms.courses.enroll(other.id, lms.pat.id, CourseRole.STAFF)
    page = lms.client.get("/instructor/courses/made-here").text
    assert 'id="roster-sync"' not in page  # no button on a course an admin made
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    answer = lms.client.post("/instructor/courses/made-here/roster", data={"csrf_token": token})
    assert answer.status_code == 422 and "has no LMS roster to sync" in text(answer)
    without_csrf = lms.client.post(f"/instructor/courses/{lms.course.key}/roster", data={})
    assert without_csrf.status_code == 403
    assert lms.course.platform_id is not None
    unoffered = lms.courses.for_context(
        platform_id=lms.course.platform_id, deployment_id="deployment-1", context_id="c2", title=None
    )
    with pytest.raises(NoRosterService, match="not offered this course's roster"):
        sync_course(
            unoffered,
            store=lms.lti,
            courses=lms.courses,
            client=lms.service.client,
            key=lms.service.key,
        )
    assert lms.platform.roster_requests == []


def test_the_fetch_is_bounded(lms: Lms) -> None:
    platform = lms.lti.platform_by_id(lms.course.platform_id or 0)
    assert platform is not None
    fetch = lambda limits: fetch_members(  # noqa: E731
        lms.service.client, platform, lms.service.key, lms.platform.memberships_url, limits
    )
    members, pages = fetch(Limits())
    assert (len(members), pages) == (5, 3)
    with pytest.raises(RosterError, match="more than 2 pages"):
        fetch(Limits(pages=2))
    with pytest.raises(RosterError, match="more than 3 members"):
        fetch(Limits(members=3))
    with pytest.raises(RosterError, match=r"larger than 0 KiB"):
        fetch(Limits(page_bytes=100))
    lms.platform.roster_page_size = 100
    lms.platform.roster = [{"user_id": f"u-{i}", "name": "x" * 200, "roles": STUDENT} for i in range(100)]
    with pytest.raises(RosterError, match=r"larger than 16 KiB"):
        fetch(Limits(page_bytes=16 * 1024))
    assert len(fetch(Limits())[0]) == 100


def test_a_next_page_on_another_site_gets_no_token(lms: Lms) -> None:
    platform = lms.lti.platform_by_id(lms.course.platform_id or 0)
    assert platform is not None
    elsewhere = Platform()
    try:
        lms.platform.routes[("GET", "/nrps/elsewhere")] = lambda handler, params: _link_to(
            handler, f"{elsewhere.url}/nrps/memberships"
        )
        with pytest.raises(RosterError, match="continues on another site"):
            fetch_members(lms.service.client, platform, lms.service.key, f"{lms.platform.url}/nrps/elsewhere")
        assert elsewhere.roster_requests == []
        lms.platform.routes[("GET", "/nrps/loop")] = lambda handler, params: _link_to(handler, "/nrps/loop")
        with pytest.raises(RosterError, match="lead back to a page already read"):
            fetch_members(lms.service.client, platform, lms.service.key, f"{lms.platform.url}/nrps/loop")
    finally:
        elsewhere.close()


def _link_to(handler: Any, url: str) -> None:
    body = container({"user_id": "u-1", "roles": STUDENT})
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(body)))
    handler.send_header("link", f'<{url}>; rel="next"')
    handler.end_headers()
    handler.wfile.write(body)


def test_a_student_cannot_sync(lms: Lms) -> None:
    """The authz walk covers every relation (tests/unit/test_authz.py); here: a student of the
    course gets the course page's 404, and nothing is asked of the LMS."""
    users = UserStore(lms.services.engine)
    stu = users.create(email="stu@uni.example", display_name="Stu", password_hash=hash_password(PASSWORD))
    lms.courses.enroll(lms.course.id, stu.id, CourseRole.STUDENT)
    other = TestClient(lms.client.app)
    page = other.get("/signin").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    assert (
        other.post(
            "/signin",
            data={"email": "stu@uni.example", "password": PASSWORD, "csrf_token": token},
            follow_redirects=False,
        ).status_code
        == 303
    )
    token = re.search(r'name="csrf_token" value="([^"]+)"', other.get("/").text).group(1)  # type: ignore[union-attr]
    answer = other.post(
        f"/instructor/courses/{lms.course.key}/roster", data={"csrf_token": token}, follow_redirects=False
    )
    assert answer.status_code in (403, 404)
    assert lms.platform.roster_requests == []
