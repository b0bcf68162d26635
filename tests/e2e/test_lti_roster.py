"""Deep-linking instructors and LMS rosters through a real server process, the
simulated platform (launches, and LTI Names and Role Provisioning Services 2.0 memberships, paged
with Link rel="next") and the simulated gradebook (OAuth 2.0 client-credentials tokens):

- an Instructor's deep-linking launch makes them staff of the launch's course at once (the
  instructor pages answer 200, not 403); a Learner's gains nothing;
- the course page's button and `remat-judge courses sync KEY` read every page of the roster,
  and the gradebook page and its CSV list the student who never launched beside those who did;
- a platform error is a message on the page (and from the CLI), and the roster stays as it was.
"""

from __future__ import annotations

import csv
import html
import io
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.lti_gradebook import Gradebook
from tests.lti_platform import (
    INSTRUCTOR,
    STUDENT,
    TEACHING_ASSISTANT,
    Browser,
    Platform,
    parse_form,
    start_gradebook,
    start_tool,
)
from tests.support import Server, remat_judge

pytestmark = [pytest.mark.e2e]

NETWORKS = '["127.0.0.0/8"]'
COURSE_LINK = re.compile(r'href="/instructor/courses/(lti-[0-9a-f]{16})"')


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform(client_id="roster-client")
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    srv = start_tool(tmp_path_factory.mktemp("lti-roster"), platform, env={"REMAT_JUDGE_LTI_ALLOW_NETWORKS": NETWORKS})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def book(server: Server, platform: Platform) -> Iterator[Gradebook]:
    gradebook = start_gradebook(server, platform)  # registers the platform with its token endpoint
    platform.token_check = gradebook.grants
    yield gradebook
    gradebook.stop()


def cli(server: Server, *args: str):  # type: ignore[no-untyped-def]
    env = dict(os.environ, REMAT_JUDGE_LTI_ALLOW_NETWORKS=NETWORKS)
    return remat_judge(*args, "--data-dir", str(server.data_dir), env=env)


def deep_link(
    server: Server, platform: Platform, *, sub: str, context_id: str, roles: list[str]
) -> tuple[Browser, Any]:
    """A browser after a deep-linking launch of `sub` from `context_id` (with the NRPS claim),
    and the tool's answer to the launch."""
    browser = Browser(server.url)
    platform.with_deep_linking(sub=sub, context_id=context_id, roles=list(roles), extra=platform.nrps_claim())
    return browser, browser.launch(platform).response


def course_key(browser: Browser) -> str:
    page = browser.client.get(f"{browser.tool_url}/instructor/courses")
    assert page.status_code == 200, page.text[:500]
    [key] = COURSE_LINK.findall(page.text)
    return key


def sync_button(browser: Browser, key: str):  # type: ignore[no-untyped-def]
    page = browser.client.get(f"{browser.tool_url}/instructor/courses/{key}")
    assert page.status_code == 200
    action, fields = parse_form(page.text, "roster-sync")
    assert action == f"/instructor/courses/{key}/roster" and fields["csrf_token"]
    return browser.client.post(browser.tool_url + action, data=fields)


def csv_rows(browser: Browser, key: str) -> dict[str, dict[str, str]]:
    text = browser.client.get(f"{browser.tool_url}/instructor/courses/{key}/gradebook.csv").text
    return {row["name"]: row for row in csv.DictReader(io.StringIO(text))}


def test_a_deep_linking_instructor_is_staff_at_once_and_a_learner_is_not(
    server: Server, platform: Platform, book: Gradebook
) -> None:
    teacher, picker = deep_link(server, platform, sub="dl-teacher", context_id="dl-course", roles=INSTRUCTOR)
    learner = Browser(server.url)
    try:
        assert picker.status_code == 200 and "Add a problem to the course" in picker.text
        # no resource link opened yet: the instructor pages answer at once
        assert teacher.client.get(f"{server.url}/instructor").status_code == 200
        key = course_key(teacher)
        course = teacher.client.get(f"{server.url}/instructor/courses/{key}")
        assert course.status_code == 200 and "JAX course" in course.text and "dl-course" in course.text
        assert 'id="roster-sync"' in course.text

        platform.with_deep_linking(sub="dl-learner", context_id="dl-course", roles=list(STUDENT))
        refused = learner.launch(platform).response
        assert refused.status_code == 403 and "Only instructors" in refused.text
        assert not learner.signed_in()
        # the learner's own launch of a resource link makes them a student of the course, nothing more
        platform.with_launch(sub="dl-learner", context_id="dl-course")
        assert learner.launch(platform).response.status_code == 200 and learner.signed_in()
        assert learner.client.get(f"{server.url}/instructor", follow_redirects=False).status_code == 403
        assert learner.client.get(f"{server.url}/instructor/courses", follow_redirects=False).status_code == 403
        assert learner.client.get(f"{server.url}/instructor/courses/{key}", follow_redirects=False).status_code in (
            403,
            404,
        )
        listed = cli(server, "courses", "list")
        row = next(line for line in listed.stdout.splitlines() if key in line)
        assert re.search(r"│\s*1\s*│\s*1\s*│\s*1\s*│", row), row  # assignments, students, staff: 1 each
    finally:
        teacher.close()
        learner.close()


def test_the_roster_syncs_by_the_button_and_the_cli_and_lists_who_never_launched(
    server: Server, platform: Platform, book: Gradebook
) -> None:
    teacher, picker = deep_link(server, platform, sub="r-teacher", context_id="roster-course", roles=INSTRUCTOR)
    ada = Browser(server.url)
    try:
        assert picker.status_code == 200
        key = course_key(teacher)
        platform.with_launch(sub="r-ada", name="Ada Launched", context_id="roster-course", extra=platform.nrps_claim())
        assert ada.launch(platform).response.status_code == 200
        platform.roster = [
            {"user_id": "r-teacher", "name": "Grace Teacher", "roles": INSTRUCTOR},
            {"user_id": "r-ada", "name": "Ada Launched", "email": "ada@lms.example", "roles": STUDENT},
            {"user_id": "r-bob", "name": "Bob Never", "email": "bob@lms.example", "roles": STUDENT},
            {"user_id": "r-tia", "name": "Tia Assistant", "roles": TEACHING_ASSISTANT},
            {"user_id": "r-cy", "name": "Cy Dropped", "roles": STUDENT, "status": "Inactive"},
        ]
        platform.roster_page_size = 2
        platform.roster_requests.clear()
        before = csv_rows(teacher, key)
        assert set(before) == {"Ada Launched"} and before["Ada Launched"]["status"] == "no submission"

        synced = sync_button(teacher, key)
        assert synced.status_code == 200, synced.text[:1000]
        assert "5 members (2 students, 2 staff, 1 inactive); 1 student never launched" in html.unescape(synced.text)
        assert len(platform.roster_requests) == 3  # three pages, rel="next" followed
        assert {r["accept"] for r in platform.roster_requests} == {
            "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
        }
        rows = csv_rows(teacher, key)
        assert {name: row["status"] for name, row in rows.items()} == {
            "Ada Launched": "no submission",
            "Bob Never": "never launched",
        }
        assert rows["Bob Never"]["email"] == "bob@lms.example" and rows["Bob Never"]["problem"] == "remat_sin_sin"
        page = teacher.client.get(f"{server.url}/instructor/courses/{key}").text
        assert "Bob Never" in page and "never launched" in page and "Tia Assistant" not in page

        # the CLI: a new student on the roster, read over three pages again
        platform.roster.append({"user_id": "r-dan", "name": "Dan New", "roles": STUDENT})
        platform.roster_requests.clear()
        done = cli(server, "courses", "sync", key)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 students never launched" in done.stdout and "(3 pages)" in done.stdout
        assert len(platform.roster_requests) == 3
        exported = cli(server, "courses", "gradebook", key, "--csv", "-")
        rows = {row["name"]: row["status"] for row in csv.DictReader(io.StringIO(exported.stdout))}
        assert rows == {"Ada Launched": "no submission", "Bob Never": "never launched", "Dan New": "never launched"}

        # platform errors: a message, and the roster as it was
        platform.roster_script = [(200, "<html>Service Unavailable</html>")]
        failed = sync_button(teacher, key)
        said = html.unescape(failed.text)
        assert failed.status_code == 502 and "The LMS's roster is not JSON" in said
        assert "the roster from the last sync is kept" in said
        platform.roster_script = [(500, '{"message": "maintenance"}')]
        failed_cli = cli(server, "courses", "sync", key)
        assert failed_cli.returncode == 1 and "The LMS answered 500 for its roster: maintenance" in failed_cli.stderr
        platform.roster_script = [(200, '{"members": [{"name": "No Id"}]}')]
        assert "has no usable user_id" in html.unescape(sync_button(teacher, key).text)
        assert {name: row["status"] for name, row in csv_rows(teacher, key).items()} == rows
    finally:
        platform.roster_script.clear()
        teacher.close()
        ada.close()
