"""Courses, gradebook, CSV, extensions and regrades through the instructor pages, fast: FastAPI's
TestClient with the app's services replaced (real SQLite, migrated; no grading: verdicts are
stored as a worker stores them)."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from server.store.accounts import SiteRole, UserStore
from server.store.course_store import CourseStore
from server.store.submissions import SubmissionRecord, SubmissionStatus, SubmissionStore
from server.web.sessions import hash_password
from tests.unit.test_api_admission import make_client

DUE = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)
SLUG = "checkpoint_dot_policy"


class Site:
    def __init__(self, tmp_path: Path):
        self.client, self.services = make_client(tmp_path)
        assert self.services.engine is not None
        self.engine = self.services.engine
        self.users = UserStore(self.engine)

    def account(self, email: str, name: str, role: SiteRole = SiteRole.USER):  # type: ignore[no-untyped-def]
        return self.users.create(email=email, display_name=name, password_hash=hash_password("pw-123456"), role=role)

    def sign_in(self, email: str) -> str:
        page = self.client.get("/signin").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        answer = self.client.post(
            "/signin", data={"email": email, "password": "pw-123456", "csrf_token": token}, follow_redirects=False
        )
        assert answer.status_code == 303, answer.text
        return self.csrf()

    def csrf(self) -> str:
        page = self.client.get("/").text  # the sign-out form carries it
        return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]

    def graded(self, user_id: int, verdict: str, score: float, at: datetime, problem: str = SLUG) -> str:
        """A submission stored and graded as a worker does, submitted at `at`."""
        store = SubmissionStore(self.engine)  # as a worker does
        record = store.create(problem=problem, source="x = 1", user_id=user_id)
        assert store.claim(record.id, worker_id="w", lease_s=60, max_attempts=3).record is not None
        assert store.finish(
            record.id, verdict=verdict, score=score, problem_version="v0", result_json="{}", worker_id="w"
        )
        with self.engine.begin() as connection:
            connection.execute(update(SubmissionRecord).where(SubmissionRecord.id == record.id).values(created_at=at))
        return record.id


@pytest.fixture
def site(tmp_path: Path) -> Site:
    s = Site(tmp_path)
    s.account("prof@uni.example", "Prof", SiteRole.ADMIN)
    return s


def test_only_instructors_see_courses(site: Site) -> None:
    assert site.client.get("/instructor/courses", follow_redirects=False).status_code == 303
    site.account("stu@uni.example", "Stu")
    page = site.client.get("/signin").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    site.client.post("/signin", data={"email": "stu@uni.example", "password": "pw-123456", "csrf_token": token})
    assert site.client.get("/instructor/courses").status_code == 403
    assert site.client.get("/instructor/courses/x/gradebook.csv").status_code == 403


def test_a_course_with_a_deadline_a_penalty_and_an_extension_grades_and_exports(site: Site) -> None:
    csrf = site.sign_in("prof@uni.example")
    assert (
        site.client.post(
            "/instructor/courses",
            data={"key": "rm-101", "title": "Remat 101", "csrf_token": csrf},
            follow_redirects=False,
        ).status_code
        == 303
    )
    answer = site.client.post(
        "/instructor/courses/rm-101/assignments",
        data={
            "problem": SLUG,
            "opens_at": "2026-11-01T00:00",  # before the attempts, which are dated near the deadline
            "due_at": "2026-11-10T12:00",
            "late_rule": "penalty",
            "penalty_per_day": "25",
            "penalty_cap": "50",
            "grade_rule": "best",
            "csrf_token": csrf,
        },
        follow_redirects=False,
    )
    assert answer.status_code == 303, answer.text
    ada, bob = site.account("ada@uni.example", "Ada"), site.account("bob@uni.example", "=HYPERLINK(1)")
    for email in ("ada@uni.example", "bob@uni.example"):
        assert (
            site.client.post(
                "/instructor/courses/rm-101/enrollments",
                data={"email": email, "role": "student", "csrf_token": csrf},
                follow_redirects=False,
            ).status_code
            == 303
        )
    site.graded(ada.id, "WRONG_POLICY", 0.0, DUE - timedelta(hours=2))
    site.graded(ada.id, "ACCEPTED", 1.0, DUE + timedelta(hours=30))  # 2 started days late: -50%
    site.graded(bob.id, "ACCEPTED", 1.0, DUE + timedelta(hours=5))  # 1 day late: -25%

    page = site.client.get("/instructor/courses/rm-101")
    assert page.status_code == 200
    rows = list(csv.DictReader(io.StringIO(site.client.get("/instructor/courses/rm-101/gradebook.csv").text)))
    by_email = {r["email"]: r for r in rows}
    assert by_email["ada@uni.example"]["score"] == "0.5000" and by_email["ada@uni.example"]["attempts"] == "2"
    assert by_email["ada@uni.example"]["late"] == "yes"
    assert by_email["bob@uni.example"]["score"] == "0.7500"
    assert by_email["bob@uni.example"]["name"] == "'=HYPERLINK(1)"  # never a formula in a spreadsheet

    assert (
        site.client.post(
            "/instructor/courses/rm-101/extensions",
            data={"problem": SLUG, "email": "ada@uni.example", "due_at": "2026-11-12T00:00", "csrf_token": csrf},
            follow_redirects=False,
        ).status_code
        == 303
    )
    rows = list(csv.DictReader(io.StringIO(site.client.get("/instructor/courses/rm-101/gradebook.csv").text)))
    ada_row = next(r for r in rows if r["email"] == "ada@uni.example")
    site.sign_in("ada@uni.example")  # the student sees her own deadline and the rules on the problem page
    dates = re.sub(
        r"\s+", " ", site.client.get(f"/problems/{SLUG}").text.split('id="assignment-dates">')[1].split("</p>")[0]
    )
    assert "Remat 101" in dates and "2026-11-12 00:00 UTC" in dates and "(your extension)" in dates
    assert "lose 25% per started day, at most 50%" in dates and "best attempt" in dates
    assert (ada_row["score"], ada_row["late"]) == ("1.0000", "no")
    assert ada_row["extension_due_at"].startswith("2026-11-12T00:00")


@pytest.mark.parametrize(
    "form, message",
    [
        ({"problem": "nope"}, "no problem"),
        ({"problem": SLUG, "opens_at": "2026-11-12T00:00", "due_at": "2026-11-10T00:00"}, "before the opening"),
        ({"problem": SLUG, "due_at": "tomorrow"}, "is not a time"),
        ({"problem": SLUG, "penalty_per_day": "150"}, "between 0 and 1"),
        ({"problem": SLUG, "late_rule": "sometimes"}, "late rule"),
        ({"problem": SLUG, "grace_minutes": "ten"}, "whole number of minutes"),
        ({"problem": SLUG, "grace_minutes": "2000"}, "grace period is 0 to 1440"),
    ],
)
def test_bad_assignments_are_refused_with_a_reason_and_change_nothing(site: Site, form: dict, message: str) -> None:
    csrf = site.sign_in("prof@uni.example")
    site.client.post("/instructor/courses", data={"key": "c1", "title": "C", "csrf_token": csrf})
    answer = site.client.post("/instructor/courses/c1/assignments", data={**form, "csrf_token": csrf})
    assert answer.status_code == 422 and message in answer.text
    assert "No assignments yet" in site.client.get("/instructor/courses/c1").text


def test_forms_need_the_csrf_token_and_unknown_courses_are_404(site: Site) -> None:
    site.sign_in("prof@uni.example")
    assert site.client.post("/instructor/courses", data={"key": "c2"}).status_code == 403
    assert site.client.get("/instructor/courses/none").status_code == 404
    assert site.client.get("/instructor/regrades/99").status_code == 404


def test_the_regrade_button_requeues_keeps_old_verdicts_and_lists_changes(site: Site) -> None:
    csrf = site.sign_in("prof@uni.example")
    ada = site.account("ada@uni.example", "Ada")
    first = site.graded(ada.id, "ACCEPTED", 1.0, DUE)
    second = site.graded(ada.id, "WRONG_POLICY", 0.0, DUE + timedelta(minutes=1))
    other = site.graded(ada.id, "ACCEPTED", 1.0, DUE, problem="remat_sin_sin")
    running = site.services.submissions.create(problem=SLUG, source="x = 2", user_id=ada.id).id
    assert site.services.leases.claim(running, worker_id="old", lease_s=60, max_attempts=3).record is not None
    answer = site.client.post(f"/instructor/problems/{SLUG}/regrade", data={"csrf_token": csrf}, follow_redirects=False)
    assert answer.status_code == 303
    page_url = answer.headers["location"]
    store = SubmissionStore(site.engine)  # as a worker does
    assert store.get(first).status == store.get(second).status == SubmissionStatus.QUEUED  # type: ignore[union-attr]
    assert store.get(other).status == SubmissionStatus.DONE  # type: ignore[union-attr]
    assert "0 of 3 submissions graded again" in site.client.get(page_url).text
    # the worker that was grading with the old version cannot store its verdict any more
    assert not store.finish(
        running, verdict="ACCEPTED", score=1.0, problem_version="v0", result_json="{}", worker_id="old"
    )
    assert store.get(running).status == SubmissionStatus.QUEUED  # type: ignore[union-attr]
    for sid, verdict, score in (
        (first, "WRONG_POLICY", 0.0),
        (second, "WRONG_POLICY", 0.0),
        (running, "ACCEPTED", 1.0),
    ):  # the new version
        assert store.claim(sid, worker_id="w", lease_s=60, max_attempts=3).record is not None
        store.finish(sid, verdict=verdict, score=score, problem_version="v1", result_json="{}", worker_id="w")
    page = site.client.get(page_url).text
    assert "3 of 3 submissions graded again" in page and "1 changed" in page  # a first verdict is no change
    assert first[:8] in page and second[:8] not in page
    from server.store.regrades import RegradeStore

    [before] = RegradeStore(site.engine).history(first)
    assert (before.verdict, before.score, before.problem_version) == ("ACCEPTED", 1.0, "v0")
    assert site.client.post("/instructor/problems/nope/regrade", data={"csrf_token": csrf}).status_code == 422


def test_an_unpublished_assignment_is_flagged_on_the_course_page(site: Site, tmp_path: Path) -> None:
    import shutil

    from graders.problems.problem import ProblemRepository
    from graders.problems.publication import mark_published
    from tests.support import PROBLEMS

    problems = tmp_path / "problems"
    shutil.copytree(PROBLEMS / SLUG, problems / SLUG)
    (problems / SLUG / ".published").unlink()
    site.services.problems = ProblemRepository(problems)
    csrf = site.sign_in("prof@uni.example")
    site.client.post("/instructor/courses", data={"key": "c3", "title": "C3", "csrf_token": csrf})
    assert (
        site.client.post(
            "/instructor/courses/c3/assignments", data={"problem": SLUG, "csrf_token": csrf}, follow_redirects=False
        ).status_code
        == 303
    )
    assert f'id="unpublished-{SLUG}"' in site.client.get("/instructor/courses/c3").text
    mark_published(problems / SLUG, ProblemRepository(problems).get(SLUG).version)
    assert f'id="unpublished-{SLUG}"' not in site.client.get("/instructor/courses/c3").text


def test_a_grace_period_from_the_form_keeps_a_minute_late_attempt_on_time(site: Site) -> None:
    csrf = site.sign_in("prof@uni.example")
    site.client.post("/instructor/courses", data={"key": "g1", "title": "Grace", "csrf_token": csrf})
    assert (
        site.client.post(
            "/instructor/courses/g1/assignments",
            data={
                "problem": SLUG,
                "opens_at": "2026-11-01T00:00",
                "due_at": "2026-11-10T12:00",
                "late_rule": "none",
                "grace_minutes": "15",
                "csrf_token": csrf,
            },
            follow_redirects=False,
        ).status_code
        == 303
    )
    assert (
        'name="grace_minutes" min="0" max="1440" step="1" value="15"' in site.client.get("/instructor/courses/g1").text
    )
    ada = site.account("ada@uni.example", "Ada")
    site.client.post(
        "/instructor/courses/g1/enrollments", data={"email": "ada@uni.example", "role": "student", "csrf_token": csrf}
    )
    site.graded(ada.id, "ACCEPTED", 1.0, DUE + timedelta(minutes=1))  # a minute late, within the grace
    row = next(csv.DictReader(io.StringIO(site.client.get("/instructor/courses/g1/gradebook.csv").text)))
    assert (row["score"], row["late"]) == ("1.0000", "no")
    site.sign_in("ada@uni.example")
    assert "15 minutes of grace, then late attempts earn no credit" in re.sub(
        r"\s+", " ", site.client.get(f"/problems/{SLUG}").text
    )


def test_a_problem_added_without_an_opening_time_opens_when_it_is_added(site: Site) -> None:
    """README: earlier attempts do not count. The opening time is stored, and saving the form as
    the page shows it (to the minute) keeps it."""
    csrf = site.sign_in("prof@uni.example")
    site.client.post("/instructor/courses", data={"key": "o1", "title": "Opening", "csrf_token": csrf})
    ada = site.account("ada@uni.example", "Ada")
    site.client.post(
        "/instructor/courses/o1/enrollments", data={"email": "ada@uni.example", "role": "student", "csrf_token": csrf}
    )
    site.graded(ada.id, "ACCEPTED", 1.0, datetime.now(UTC) - timedelta(hours=1))  # before the assignment
    before = datetime.now(UTC)
    form = {"problem": SLUG, "csrf_token": csrf}
    assert site.client.post("/instructor/courses/o1/assignments", data=form, follow_redirects=False).status_code == 303
    courses = CourseStore(site.engine)
    course = courses.get("o1")
    assert course is not None
    opened = courses.assignment(course.id, SLUG)
    assert opened is not None and opened.opens_at is not None and before <= opened.opens_at <= datetime.now(UTC)
    row = next(csv.DictReader(io.StringIO(site.client.get("/instructor/courses/o1/gradebook.csv").text)))
    assert (row["score"], row["attempts"]) == ("", "0")  # the earlier attempt does not count

    site.graded(ada.id, "WRONG_POLICY", 0.25, opened.opens_at + timedelta(seconds=1))
    row = next(csv.DictReader(io.StringIO(site.client.get("/instructor/courses/o1/gradebook.csv").text)))
    assert (row["score"], row["attempts"]) == ("0.2500", "1")

    shown = re.search(r'name="opens_at" value="([^"]+)"', site.client.get("/instructor/courses/o1").text)
    assert shown is not None and shown.group(1) == opened.opens_at.strftime("%Y-%m-%dT%H:%M")
    saved = {**form, "opens_at": shown.group(1), "due_at": "2027-01-01T00:00"}
    assert site.client.post("/instructor/courses/o1/assignments", data=saved, follow_redirects=False).status_code == 303
    kept = courses.assignment(course.id, SLUG)
    assert kept is not None and kept.opens_at == opened.opens_at and kept.due_at is not None


def test_a_new_assignment_without_an_opening_time_refuses_a_deadline_already_past(site: Site) -> None:
    csrf = site.sign_in("prof@uni.example")
    site.client.post("/instructor/courses", data={"key": "o2", "title": "Past", "csrf_token": csrf})
    answer = site.client.post(
        "/instructor/courses/o2/assignments", data={"problem": SLUG, "due_at": "2020-01-01T00:00", "csrf_token": csrf}
    )
    assert answer.status_code == 422 and "the deadline is already past" in answer.text
