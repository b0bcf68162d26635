"""Who may do what (server/authz.py), walked through the real routes, fast: FastAPI's TestClient on
real SQLite, one browser (cookie jar) per person.

The world: an admin; course A made by the admin (staff Sam, students Ada and Al) and course B made
by an LMS launch (staff Bea, student Bo), both assigning the published problem P; Uma, signed in
but in no course; an API client. For every action of `TABLE` and every column, the test picks the
person who stands in that relation to the target, makes the request that action guards, and
checks the answer against the cell: allowed, or refused (303 to sign in, 403 or 404). The table
printed in SECURITY.md is checked to be this one.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from fastapi.testclient import TestClient

from server.app import create_app
from server.authz import (
    ANONYMOUS,
    TABLE,
    Access,
    Action,
    Principal,
    Relation,
    Rule,
    SubmissionTarget,
    decide,
    markdown_table,
)
from server.deps import get_services
from server.runtime import build_lti
from server.settings import Settings
from server.store.accounts import SiteRole, UserStore
from server.store.course_store import CourseStore
from server.store.courses import Course, CourseRole, Policy
from server.store.lti_store import LtiStore
from server.web.sessions import hash_password
from tests.support import PROBLEMS, REPO
from tests.unit.test_api_admission import make_services

P = "remat_sin_sin"  # published, assigned in both courses
Q = "checkpoint_each_layer"  # published, assigned nowhere
DRAFT = "checkpoint_dot_policy"  # unpublished
PASSWORD = "pw-123456"


@dataclass
class World:
    app: object
    services: object
    courses: dict[str, Course]
    people: dict[str, int]
    subs: dict[str, str]
    api_key: str
    regrade_id: int

    def browser(self, who: str | None) -> TestClient:
        """A new browser, signed in as `who` (None: nobody)."""
        client = TestClient(self.app)  # type: ignore[arg-type]
        if who is not None:
            page = client.get("/signin").text
            token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
            answer = client.post(
                "/signin",
                data={"email": f"{who}@uni.example", "password": PASSWORD, "csrf_token": token},
                follow_redirects=False,
            )
            assert answer.status_code == 303, answer.text
        return client


def csrf(client: TestClient) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/signin").text)
    assert match
    return match.group(1)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("authz")
    problems = root / "problems"
    for slug in (P, Q, DRAFT):
        shutil.copytree(PROBLEMS / slug, problems / slug)
    (problems / DRAFT / ".published").unlink()
    settings = Settings(
        data_dir=root,
        problems_dir=problems,
        hidden_seed="unit",
        rate_limit="",
        allow_anonymous_api=False,
        signin_failures_per_ip="",
        signin_failures_per_account="",
    )
    services = make_services(settings, f"sqlite:///{root / 'judge.db'}")
    from graders.problems.problem import ProblemRepository

    services.problems = ProblemRepository(problems)
    engine = services.engine
    users = UserStore(engine)
    people = {}
    for name, role in (
        ("admin", SiteRole.ADMIN),
        ("sam", SiteRole.USER),
        ("ada", SiteRole.USER),
        ("al", SiteRole.USER),
        ("bea", SiteRole.USER),
        ("bo", SiteRole.USER),
        ("uma", SiteRole.USER),
        ("newbie", SiteRole.USER),
    ):  # newbie: whom the enrollment probes enroll
        people[name] = users.create(
            email=f"{name}@uni.example", display_name=name.title(), password_hash=hash_password(PASSWORD), role=role
        ).id
    store = CourseStore(engine)
    lti = LtiStore(engine)
    platform = lti.register(
        issuer="https://lms.example",
        client_id="c1",
        deployment_ids=["d1"],
        auth_login_url="https://lms.example/auth",
        auth_token_url="https://lms.example/token",
        keyset_url="https://lms.example/jwks",
    )
    a = store.create("course-a", "Course A")
    b = store.for_context(platform_id=platform.id, deployment_id="d1", context_id="ctx-b", title="Course B")
    for course, staff, students in ((a, "sam", ("ada", "al")), (b, "bea", ("bo",))):
        store.enroll(course.id, people[staff], CourseRole.STAFF)
        for s in students:
            store.enroll(course.id, people[s], CourseRole.STUDENT)
        store.set_assignment(course.id, P, Policy())
    clients = services.clients
    client, api_key = clients.create("lms-plugin")
    subs = {}
    submissions = services.submissions
    for name, owner, problem in (("ada_p", "ada", P), ("ada_q", "ada", Q), ("bo_p", "bo", P), ("uma_p", "uma", P)):
        subs[name] = submissions.create(problem=problem, source=f"# {name}\n", user_id=people[owner]).id
    subs["client_p"] = submissions.create(problem=P, source="# api\n", client_id=client.id).id
    from server.store.regrades import RegradeStore

    regrade = RegradeStore(engine).start(P, problem_version="v", requested_by="admin@uni.example")
    app = create_app(settings)
    app.dependency_overrides[get_services] = lambda: services
    services.lti = build_lti(settings, engine)  # the lifespan does not run
    return World(
        app=app,
        services=services,
        courses={"A": a, "B": b},
        people=people,
        subs=subs,
        api_key=api_key,
        regrade_id=regrade.id,
    )


# --- the probes: one request per action, on a target -------------------------------------------------

ALLOWED, REFUSED = True, False


def _outcome(response: httpx.Response, ok: set[int]) -> bool:
    """Whether the answer grants the request: a status in `ok` (a 303 counts only when it does
    not send the browser to sign in)."""
    if response.status_code == 303 and response.headers["location"].startswith("/signin"):
        return REFUSED
    if response.status_code in ok:
        return ALLOWED
    assert response.status_code in (303, 401, 403, 404), (response.status_code, response.text[:300])
    return REFUSED


Probe = Callable[[World, TestClient], bool]


def course_view(course: str) -> Probe:
    def probe(w: World, c: TestClient) -> bool:
        key = w.courses[course].key
        page = _outcome(c.get(f"/instructor/courses/{key}", follow_redirects=False), {200})
        csv = _outcome(c.get(f"/instructor/courses/{key}/gradebook.csv", follow_redirects=False), {200})
        assert page == csv
        return page

    return probe


def course_edit(course: str) -> Probe:
    def probe(w: World, c: TestClient) -> bool:
        key = w.courses[course].key
        rules = _outcome(
            c.post(
                f"/instructor/courses/{key}/assignments",
                data={"problem": P, "due_at": "2030-01-01T00:00", "csrf_token": csrf(c)},
                follow_redirects=False,
            ),
            {303},
        )
        student = "ada" if course == "A" else "bo"
        extension = _outcome(
            c.post(
                f"/instructor/courses/{key}/extensions",
                data={
                    "problem": P,
                    "email": f"{student}@uni.example",
                    "due_at": "2030-02-01T00:00",
                    "csrf_token": csrf(c),
                },
                follow_redirects=False,
            ),
            {303},
        )
        assert rules == extension
        return rules

    return probe


def course_enroll(course: str) -> Probe:
    def probe(w: World, c: TestClient) -> bool:
        return _outcome(
            c.post(
                f"/instructor/courses/{w.courses[course].key}/enrollments",
                data={"email": "newbie@uni.example", "role": "student", "csrf_token": csrf(c)},
                follow_redirects=False,
            ),
            {303},
        )

    return probe


def course_settings(course: str) -> Probe:
    def probe(w: World, c: TestClient) -> bool:
        return _outcome(
            c.post(
                f"/instructor/courses/{w.courses[course].key}/settings",
                data={"solutions_after_deadline": "on", "csrf_token": csrf(c)},
                follow_redirects=False,
            ),
            {303},
        )

    return probe


def course_board(course: str) -> Probe:
    """The course's board of its assignment P: never a source, whoever may see it."""

    def probe(w: World, c: TestClient) -> bool:
        answer = c.get(f"/courses/{w.courses[course].key}/board/{P}", follow_redirects=False)
        allowed = _outcome(answer, {200})
        if allowed:
            assert "Best submission per student" in answer.text or 'id="board-empty"' in answer.text
        return allowed

    return probe


def course_roster(course: str) -> Probe:
    """The roster sync button: allowed is the course page again (200 synced; 422 when the course
    has no LMS roster service, as neither course here has; 502 when the LMS failed)."""

    def probe(w: World, c: TestClient) -> bool:
        answer = c.post(
            f"/instructor/courses/{w.courses[course].key}/roster",
            data={"csrf_token": csrf(c)},
            follow_redirects=False,
        )
        allowed = _outcome(answer, {200, 422, 502})
        if allowed:
            assert 'id="course-error"' in answer.text or 'id="course-notice"' in answer.text
        return allowed

    return probe


def read_submission(name: str) -> Probe:
    def probe(w: World, c: TestClient) -> bool:
        sid = w.subs[name]
        raw = _outcome(c.get(f"/submissions/{sid}/source.py", follow_redirects=False), {200})
        status = _outcome(c.get(f"/submissions/{sid}/status", follow_redirects=False), {200})
        assert raw == status
        return raw

    return probe


def problems_manage(w: World, c: TestClient) -> bool:
    page = _outcome(c.get(f"/problems/{DRAFT}", follow_redirects=False), {200})
    solution = _outcome(c.get(f"/problems/{P}/solution", follow_redirects=False), {200})  # nobody solved P
    assert page == solution
    return page


def problems_regrade(w: World, c: TestClient) -> bool:
    start = _outcome(
        c.post(f"/instructor/problems/{Q}/regrade", data={"csrf_token": csrf(c)}, follow_redirects=False), {303}
    )
    page = _outcome(c.get(f"/instructor/regrades/{w.regrade_id}", follow_redirects=False), {200})
    assert start == page
    return start


def clients_manage(w: World, c: TestClient) -> bool:
    return _outcome(c.get("/instructor/clients", follow_redirects=False), {200})


def lti_manage(w: World, c: TestClient) -> bool:
    setup = _outcome(c.get("/lti/setup", follow_redirects=False), {200})
    grades = _outcome(c.get("/lti/grades", follow_redirects=False), {200})
    assert setup == grades
    return setup


def submissions_all(w: World, c: TestClient) -> bool:
    """Everyone's submissions: Uma's (in no course) listed on /instructor."""
    page = c.get("/instructor", follow_redirects=False)
    if _outcome(page, {200}) is REFUSED:
        return REFUSED
    return w.subs["uma_p"] in page.text


def courses_create(w: World, c: TestClient) -> bool:
    key = f"made-{abs(hash(c)) % 10**8}"
    return _outcome(
        c.post("/instructor/courses", data={"key": key, "title": "T", "csrf_token": csrf(c)}, follow_redirects=False),
        {303},
    )


# (action, probe, course the target belongs to, or the submission's name)
PROBES: list[tuple[Action, Probe, str]] = [
    (Action.PROBLEMS_MANAGE, problems_manage, ""),
    (Action.PROBLEMS_REGRADE, problems_regrade, ""),
    (Action.CLIENTS_MANAGE, clients_manage, ""),
    (Action.LTI_MANAGE, lti_manage, ""),
    (Action.SUBMISSIONS_ALL, submissions_all, ""),
    (Action.COURSES_CREATE, courses_create, ""),
    *[(Action.COURSE_VIEW, course_view(k), k) for k in "AB"],
    *[(Action.COURSE_EDIT, course_edit(k), k) for k in "AB"],
    *[(Action.COURSE_ENROLL, course_enroll(k), k) for k in "AB"],
    *[(Action.COURSE_SETTINGS, course_settings(k), k) for k in "AB"],
    *[(Action.COURSE_ROSTER, course_roster(k), k) for k in "AB"],
    *[(Action.COURSE_BOARD, course_board(k), k) for k in "AB"],
    *[(Action.SUBMISSION_READ, read_submission(s), s) for s in ("ada_p", "bo_p")],
]

# who stands in each relation to a target in course A or B (for a submission: of the author's course)
ACTORS = {
    "A": {
        Relation.ANONYMOUS: None,
        Relation.USER: "uma",
        Relation.STUDENT: "al",
        Relation.STAFF: "sam",
        Relation.OTHER_STAFF: "bea",
        Relation.ADMIN: "admin",
    },
    "B": {
        Relation.ANONYMOUS: None,
        Relation.USER: "uma",
        Relation.STUDENT: None,
        Relation.STAFF: "bea",
        Relation.OTHER_STAFF: "sam",
        Relation.ADMIN: "admin",
    },
    "": {
        Relation.ANONYMOUS: None,
        Relation.USER: "uma",
        Relation.STUDENT: "ada",
        Relation.STAFF: "sam",
        Relation.OTHER_STAFF: "bea",
        Relation.ADMIN: "admin",
    },
}
COURSE_OF = {"ada_p": "A", "bo_p": "B", "A": "A", "B": "B", "": ""}


def _expected(rule: Rule, relation: Relation, target: str) -> bool:
    if rule == Rule.YES:
        return ALLOWED
    if rule == Rule.NOT_LMS:
        return COURSE_OF[target] == "A"  # A was made by an admin, B by an LMS launch
    return REFUSED  # NO, and OWN for someone who did not make the target (the authors are not actors here)


CASES = [
    (action, probe, target, relation)
    for action, probe, target in PROBES
    for relation in Relation
    if relation != Relation.API_CLIENT
    and ACTORS[COURSE_OF[target]].get(relation, "absent") != "absent"
    and not (relation == Relation.STUDENT and ACTORS[COURSE_OF[target]][relation] is None)
]


@pytest.mark.parametrize(
    "action, probe, target, relation", CASES, ids=[f"{a.value}-{t or 'site'}-{r.value}" for a, _, t, r in CASES]
)
def test_every_cell_of_the_table_through_the_routes(
    world: World, action: Action, probe: Probe, target: str, relation: Relation
) -> None:
    who = ACTORS[COURSE_OF[target]][relation]
    expected = _expected(TABLE[action][relation], relation, target)
    assert probe(world, world.browser(who)) is expected, f"{who or 'anonymous'} as {relation.value}"


def test_authors_read_their_own_and_api_clients_theirs(world: World) -> None:
    """The `own` cells: an author reads their submission; an API client its own and no one else's."""
    assert read_submission("ada_p")(world, world.browser("ada")) is ALLOWED
    assert read_submission("uma_p")(world, world.browser("uma")) is ALLOWED
    assert read_submission("uma_p")(world, world.browser("ada")) is REFUSED
    api = TestClient(world.app)  # type: ignore[arg-type]
    auth = {"Authorization": f"Bearer {world.api_key}"}
    assert api.get(f"/api/v1/submissions/{world.subs['client_p']}", headers=auth).status_code == 200
    assert api.get(f"/api/v1/submissions/{world.subs['ada_p']}", headers=auth).status_code == 404
    # staff read only submissions to their course's assignments: Ada's work on Q is not Sam's business
    assert read_submission("ada_q")(world, world.browser("sam")) is REFUSED
    assert read_submission("ada_q")(world, world.browser("admin")) is ALLOWED


def test_staff_lists_show_their_course_only(world: World) -> None:
    sam = world.browser("sam")
    home = sam.get("/instructor").text
    assert world.subs["ada_p"] in home and world.subs["bo_p"] not in home and world.subs["uma_p"] not in home
    assert world.subs["client_p"] not in home and world.subs["ada_q"] not in home
    courses = sam.get("/instructor/courses").text
    assert "Course A" in courses and "Course B" not in courses and "New course" not in courses
    problem = sam.get(f"/instructor/problems/{P}").text
    assert "bo@uni.example" not in problem and "ada@uni.example" in problem and "Regrade" not in problem
    assert 'href="/instructor/clients"' not in home and 'href="/lti/setup"' not in home
    assert 'href="/instructor"' not in world.browser("uma").get("/").text  # no Instructor link for a plain user
    assert 'href="/instructor"' in sam.get("/").text


def test_the_sql_scope_agrees_with_decide(world: World) -> None:
    """`Access.submission_scope` (listings) selects exactly what `decide` allows one by one."""
    services = world.services
    access: Access = services.access  # type: ignore[attr-defined]
    users = UserStore(services.engine)  # type: ignore[attr-defined]
    principals: list[Principal] = [ANONYMOUS, *(access.principal(users.get(uid)) for uid in world.people.values())]
    everything = [r for r, _ in services.reports.recent(limit=1000)]  # type: ignore[attr-defined]
    for principal in principals:
        listed = {r.id for r, _ in services.reports.recent(limit=1000, scope=access.submission_scope(principal))}  # type: ignore[attr-defined]
        allowed = {r.id for r in everything if decide(principal, Action.SUBMISSION_READ, access.submission_target(r))}
        assert listed == allowed, principal


def test_an_lms_instructor_of_one_course_is_staff_there_only() -> None:
    """`decide` for a principal who is staff of course 1: nothing site-wide, nothing of course 2."""
    from server.authz import CourseTarget

    staff = Principal(user_id=5, staff_of=frozenset({1}))
    assert decide(staff, Action.COURSE_VIEW, CourseTarget(1, from_lms=True))
    assert not decide(staff, Action.COURSE_VIEW, CourseTarget(2, from_lms=True))
    assert not decide(staff, Action.COURSE_ENROLL, CourseTarget(1, from_lms=True))
    assert decide(staff, Action.COURSE_ENROLL, CourseTarget(1, from_lms=False))
    assert not any(decide(staff, a) for a in Action if not a.value.startswith(("course.", "submission.")))
    assert decide(staff, Action.SUBMISSION_READ, SubmissionTarget(9, None, frozenset({1})))
    assert not decide(staff, Action.SUBMISSION_READ, SubmissionTarget(9, None, frozenset({2})))
    with pytest.raises(ValueError):
        decide(staff, Action.COURSE_VIEW)


def test_security_md_prints_this_table() -> None:
    assert markdown_table() in (REPO / "SECURITY.md").read_text(encoding="utf-8")
