"""Authority scoped to a course, on a real server with the simulated LMS: two LMS courses launch
into one judge. Grace teaches course A; Mallory is an LMS Instructor of course B, a course she made
herself (a Canvas sandbox), with a student of her own. Her launch makes her staff of B and nothing
more: she cannot read course A's gradebook, students, sources or submissions, nor any site-level
page, nor regrade; Grace reads A and not B. An admin (made with `remat-judge users role`) reads
both. Everything through HTTP, as browsers and the LMS do it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import httpx
import pytest

from server.store.accounts import SiteRole, UserStore
from server.store.courses import context_key
from server.store.db import make_engine
from server.store.lti import lti_email
from server.store.lti_store import LtiStore
from tests.e2e.test_lti_grade_passback import RIGHT, SLUG, submit_on_the_web
from tests.lti_platform import INSTRUCTOR, Browser, Platform, start_tool
from tests.support import Server, remat_judge

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform(client_id="roles-client")
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    srv = start_tool(tmp_path_factory.mktemp("course-roles"), platform, workers=1)
    done = remat_judge(*platform.register_args("deployment-1"), "--data-dir", str(srv.data_dir), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    yield srv
    srv.stop()


def launch(
    server: Server,
    platform: Platform,
    *,
    sub: str,
    context: str,
    roles: list[str] | None = None,
    email: str | None = None,
) -> Browser:
    browser = Browser(server.url)
    spec = {
        "sub": sub,
        "name": sub.title(),
        "email": email,
        "context_id": context,
        "resource_link_id": f"link-{context}",
    }
    platform.with_launch(**spec, **({"roles": roles} if roles else {}))
    answer = browser.launch(platform).response
    assert answer.status_code == 200 and answer.url.path == f"/problems/{SLUG}", (answer.status_code, answer.text[:300])
    return browser


def csrf(client: httpx.Client, base: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(f"{base}/problems/{SLUG}").text)
    assert match
    return match.group(1)


def status(client: httpx.Client, url: str) -> int:
    return client.get(url, follow_redirects=False).status_code


def test_an_lms_instructor_is_staff_of_their_course_only(server: Server, platform: Platform) -> None:
    base = server.url
    grace = launch(server, platform, sub="grace", context="course-A", roles=INSTRUCTOR, email="grace@uni.example")
    ada = launch(server, platform, sub="ada", context="course-A", email="ada@uni.example")
    mallory = launch(server, platform, sub="mallory", context="course-B", roles=INSTRUCTOR)
    bo = launch(server, platform, sub="bo", context="course-B")
    ada_sub = submit_on_the_web(ada.client, base, RIGHT)
    bo_sub = submit_on_the_web(bo.client, base, RIGHT)
    issuer = platform.issuer
    lti = LtiStore(make_engine(f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}"))
    platform_id = lti.platforms_for(issuer, platform.client_id)[0].id
    course_a = context_key(platform_id, "deployment-1", "course-A")
    course_b = context_key(platform_id, "deployment-1", "course-B")
    users = UserStore(make_engine(f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}"))

    # an LMS Instructor launch grants no site role, and the LMS email stays free for sign-up
    for sub in ("grace", "mallory"):
        account = users.by_email(lti_email(issuer, sub))
        assert account is not None and account.role == SiteRole.USER
    assert users.by_email("grace@uni.example") is None

    m = mallory.client
    for path in (
        f"/instructor/courses/{course_a}",
        f"/instructor/courses/{course_a}/gradebook.csv",
        f"/submissions/{ada_sub}",
        f"/submissions/{ada_sub}/source.py",
        f"/submissions/{ada_sub}/status",
        f"/instructor/submissions/{ada_sub}/source",
    ):
        assert status(m, base + path) == 404, path
    for path in ("/instructor/clients", "/lti/setup", "/lti/grades", "/instructor/regrades/1"):
        assert status(m, base + path) == 403, path
    token = csrf(m, base)
    for path, form in (
        (f"/instructor/problems/{SLUG}/regrade", {}),
        ("/instructor/courses", {"key": "mine"}),
        (
            f"/instructor/courses/{course_a}/extensions",
            {"problem": SLUG, "email": "ada@uni.example", "due_at": "2030-01-01T00:00"},
        ),
        (f"/instructor/courses/{course_b}/enrollments", {"email": lti_email(issuer, "ada")}),
    ):
        answer = m.post(base + path, data={**form, "csrf_token": token}, follow_redirects=False)
        assert answer.status_code in (403, 404), (path, answer.status_code)
    home = m.get(f"{base}/instructor").text
    assert bo_sub in home and ada_sub not in home and "Ada" not in home
    own = m.get(f"{base}/instructor/courses/{course_b}")
    assert own.status_code == 200 and "Bo" in own.text and "Ada" not in own.text
    assert status(m, f"{base}/submissions/{bo_sub}/source.py") == 200
    assert status(m, f"{base}/instructor/courses") == 200 and course_a not in m.get(f"{base}/instructor/courses").text

    g = grace.client
    assert status(g, f"{base}/submissions/{ada_sub}/source.py") == 200
    assert status(g, f"{base}/submissions/{bo_sub}/source.py") == 404
    book = g.get(f"{base}/instructor/courses/{course_a}/gradebook.csv").text
    assert "ada@uni.example" in book and "Bo" not in book  # the LMS email, shown to the course's staff
    # a student reads only their own
    assert status(bo.client, f"{base}/submissions/{ada_sub}/source.py") == 404
    assert status(bo.client, f"{base}/instructor") == 403

    # an admin is made by the CLI only, and then sees both courses at the next request
    done = remat_judge(
        "users", "role", lti_email(issuer, "grace"), "admin", "--data-dir", str(server.data_dir), env=dict(os.environ)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert status(g, f"{base}/submissions/{bo_sub}/source.py") == 200
    assert status(g, f"{base}/lti/setup") == 200 and status(g, f"{base}/instructor/courses/{course_b}") == 200
    for browser in (grace, ada, mallory, bo):
        browser.close()
