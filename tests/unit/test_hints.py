"""Hints one at a time (server/web/hint_opening.py) through the problem page, fast: TestClient, real
SQLite; verdicts stored as a worker stores them."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from server.store.accounts import SiteRole
from server.store.course_store import CourseStore
from server.store.courses import CourseRole, Policy
from server.store.db import utcnow
from server.store.hints import HintStore
from server.web.hint_opening import open_by_attempts, split_hints
from tests.unit.test_course_pages import DUE, Site

SLUG = "remat_sin_sin"


def test_split_hints_at_second_level_headings() -> None:
    hints = split_hints("# Hints\n\nintro\n\n## First\n\nsay A\n\n## Second one\n\n```py\n## not a heading? yes\n```\n")
    assert [(h.number, h.title) for h in hints][:2] == [(1, "First"), (2, "Second one")]
    assert hints[0].body == "say A"
    assert split_hints("no headings") == []
    assert [open_by_attempts(n, 3) for n in (0, 1, 2, 5)] == [0, 1, 2, 3]


@pytest.fixture
def site(tmp_path: Path) -> Site:
    s = Site(tmp_path)
    s.account("prof@uni.example", "Prof", SiteRole.ADMIN)
    return s


def hints_section(site: Site) -> str:
    return site.client.get(f"/problems/{SLUG}").text.split('id="hints"')[1].split("</section>")[0]


def test_hints_open_after_failed_attempts_or_on_request_and_requests_are_counted(site: Site) -> None:
    ada = site.account("ada@uni.example", "Ada")
    csrf = site.sign_in("ada@uni.example")
    section = hints_section(site)
    assert "0 of 3 open" in section and "Hint 1:" not in section and "Show hint 1 now" in section
    site.graded(ada.id, "WRONG_POLICY", 0.0, DUE, problem=SLUG)
    site.graded(ada.id, "INTERNAL_ERROR", 0.0, DUE, problem=SLUG)  # the judge's fault: opens nothing
    section = hints_section(site)
    assert "1 of 3 open" in section and "Hint 1:" in section and "Hint 2:" not in section
    answer = site.client.post(
        f"/problems/{SLUG}/hints", data={"number": "2", "csrf_token": csrf}, follow_redirects=False
    )
    assert answer.status_code == 303
    site.client.post(f"/problems/{SLUG}/hints", data={"number": "2", "csrf_token": csrf})  # twice: nothing more
    site.client.post(f"/problems/{SLUG}/hints", data={"number": "9", "csrf_token": csrf})  # not the next: nothing
    section = hints_section(site)
    assert "2 of 3 open" in section and "Hint 2:" in section and "Hint 3:" not in section
    assert HintStore(site.engine).requested_counts(SLUG) == {ada.id: 1}
    assert site.client.post(f"/problems/{SLUG}/hints", data={"number": "3"}).status_code == 403  # no CSRF token
    assert site.client.get(f"/problems/{SLUG}/solution").status_code == 403
    site.graded(ada.id, "ACCEPTED", 1.0, DUE, problem=SLUG)
    section = hints_section(site)
    assert "3 of 3 open" in section and "The reference solution" in section
    solution = re.sub(r"<[^>]+>", "", site.client.get(f"/problems/{SLUG}/solution").text)  # the code as text
    assert "jax.checkpoint(sin_sin)" in solution and "Never served" not in solution  # no internal docstring
    assert solution.count("Hints") == 0


def test_the_solution_opens_after_the_students_deadline(site: Site) -> None:
    ada = site.account("ada@uni.example", "Ada")
    courses = CourseStore(site.engine)
    course = courses.create("c1", "C1")
    courses.enroll(course.id, ada.id, CourseRole.STUDENT)
    courses.set_assignment(course.id, SLUG, Policy(due_at=utcnow() + timedelta(hours=1)))
    site.sign_in("ada@uni.example")
    assert site.client.get(f"/problems/{SLUG}/solution").status_code == 403
    assignment = courses.assignment(course.id, SLUG)
    assert assignment is not None
    courses.set_assignment(course.id, SLUG, Policy(due_at=utcnow() - timedelta(minutes=1)))
    assert site.client.get(f"/problems/{SLUG}/solution").status_code == 200
    courses.extend(assignment.id, ada.id, utcnow() + timedelta(days=1))  # her extension runs on: still closed
    assert site.client.get(f"/problems/{SLUG}/solution").status_code == 403
