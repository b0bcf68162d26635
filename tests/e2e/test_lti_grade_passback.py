"""LTI grade passback (AGS) through a real server process: a student launched from
the simulated platform submits on the web, and the simulated gradebook (its token endpoint
verifying the tool's client assertion against the tool's /lti/jwks; Moodle's 400/409 rules on
its line items) receives the scores in order; a web user without a launch sends nothing."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from server.store.db import make_engine
from server.store.lti import lti_email
from server.store.lti_passback import PassbackStore
from server.store.submissions import SubmissionStore
from tests.lti_gradebook import Gradebook
from tests.lti_platform import INSTRUCTOR, Browser, Platform, start_gradebook, start_tool
from tests.support import PROBLEMS, Server, remat_judge

pytestmark = [pytest.mark.e2e]

SLUG = "remat_sin_sin"
RIGHT = (PROBLEMS / SLUG / "reference.py").read_text()
WRONG = (PROBLEMS / SLUG / "wrong" / "no_checkpoint.py").read_text()
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform(client_id="grades-client")
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform) -> Iterator[Server]:
    srv = start_tool(
        tmp_path_factory.mktemp("lti-grades"),
        platform,
        workers=2,
        env={"REMAT_JUDGE_LTI_ALLOW_NETWORKS": '["127.0.0.0/8"]'},
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def book(server: Server, platform: Platform) -> Iterator[Gradebook]:
    gradebook = start_gradebook(server, platform)
    yield gradebook
    gradebook.stop()


def _db(server: Server) -> str:
    return f"sqlite:///{(server.data_dir / 'remat-judge.db').resolve()}"


def _csrf(page: str) -> str:
    return page.split('name="csrf_token" value="')[1].split('"')[0]


def submit_on_the_web(client: httpx.Client, base: str, source: str) -> str:
    """Submits `source` with the problem page's form (session cookie and CSRF token); its id."""
    token = _csrf(client.get(f"{base}/problems/{SLUG}").text)
    answer = client.post(
        f"{base}/problems/{SLUG}/submit",
        data={"source": source, "csrf_token": token},
        headers={"accept": "application/json"},
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def wait_for_verdict(server: Server, submission_id: str, timeout_s: float = 180) -> tuple[str, float]:
    store = SubmissionStore(make_engine(_db(server)))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = store.get(submission_id)
        if record is not None and record.status in ("done", "failed"):
            assert record.verdict is not None and record.score is not None
            return record.verdict, record.score
        time.sleep(0.2)
    raise AssertionError(f"no verdict for {submission_id}")


def wait_until(condition, timeout_s: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_launched_students_verdicts_reach_the_gradebook_in_order(
    server: Server, platform: Platform, book: Gradebook
) -> None:
    lineitem = book.lineitem_url("7", "?type_id=3")  # Moodle's line items carry a query string
    platform.with_launch(
        sub="student-grades-1",
        name="Ada Student",
        email=None,
        ags={"scope": [SCORE_SCOPE], "lineitem": lineitem, "lineitems": f"{book.base_url}/lineitems"},
    )
    browser = Browser(server.url)
    try:
        landed = browser.launch(platform).response
        assert landed.status_code == 200 and landed.url.path == f"/problems/{SLUG}", landed.text[:500]

        wrong_id = submit_on_the_web(browser.client, server.url, WRONG)
        wrong_verdict, wrong_score = wait_for_verdict(server, wrong_id)
        assert wrong_verdict != "ACCEPTED" and wrong_score < 1.0
        right_id = submit_on_the_web(browser.client, server.url, RIGHT)
        assert wait_for_verdict(server, right_id) == ("ACCEPTED", 1.0)

        wait_until(lambda: len(book.accepted("7", "student-grades-1")) == 2)
        first, second = book.accepted("7", "student-grades-1")
        for score in (first, second):
            assert score["userId"] == "student-grades-1" and score["scoreMaximum"] == 1
            assert score["activityProgress"] == "Completed" and score["gradingProgress"] == "FullyGraded"
        assert (first["scoreGiven"], second["scoreGiven"]) == (wrong_score, 1.0)
        stamps = [datetime.fromisoformat(s["timestamp"]) for s in (first, second)]
        assert int(stamps[1].timestamp()) > int(stamps[0].timestamp())  # strictly newer in whole seconds
        sent = [r for r in book.requests if r.path == "/lineitems/7/lineitem/scores"]
        assert [r.status for r in sent] == [200, 200]
        assert all(r.query == {"type_id": ["3"]} for r in sent)
        assert all(r.headers["content-type"] == "application/vnd.ims.lis.v1.score+json" for r in sent)
        assert "https://canvas.instructure.com/lti/submission" in second  # the submission time, for Canvas

        # a worse attempt afterwards: the best rule keeps 1.0, and nothing more is sent
        worse_id = submit_on_the_web(browser.client, server.url, WRONG)
        wait_for_verdict(server, worse_id)
        passbacks = PassbackStore(make_engine(_db(server)))
        wait_until(
            lambda: (
                [(r.status, r.best_score) for r in passbacks.rows() if r.sub == "student-grades-1"]
                == [("delivered", 1.0)]
            )
        )
        time.sleep(1.5)
        assert len([r for r in book.requests if r.path == "/lineitems/7/lineitem/scores"]) == 2
        assert [s["scoreGiven"] for s in book.accepted("7", "student-grades-1")] == [wrong_score, 1.0]
    finally:
        browser.close()

    # admins see the passback state (an LMS instructor is staff of a course, not an admin, until the CLI says so)
    teacher = Browser(server.url)
    try:
        platform.with_launch(sub="teacher-grades", roles=INSTRUCTOR, email=None)
        assert teacher.launch(platform).response.status_code == 200
        assert teacher.client.get(f"{server.url}/lti/grades").status_code == 403
        done = remat_judge(
            "users",
            "role",
            lti_email(platform.issuer, "teacher-grades"),
            "admin",
            "--data-dir",
            str(server.data_dir),
            env=dict(os.environ),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        page = teacher.client.get(f"{server.url}/lti/grades")
        assert page.status_code == 200 and "student-grades-1" in page.text and "delivered" in page.text
        assert "/lti/grades" in teacher.client.get(f"{server.url}/lti/setup").text
    finally:
        teacher.close()


def test_a_web_user_without_a_launch_sends_nothing(server: Server, book: Gradebook, tmp_path: Path) -> None:
    before = (len(book.requests), len(book.token_requests))
    with httpx.Client(base_url=server.url, timeout=60, follow_redirects=True) as browser:
        token = _csrf(browser.get("/signup").text)
        browser.post(
            "/signup",
            data={
                "email": "web-only@example.org",
                "display_name": "Web Only",
                "password": "correct horse 1",
                "csrf_token": token,
            },
        )
        assert browser.get("/lti/grades", follow_redirects=False).status_code == 403  # not an instructor
        submission_id = submit_on_the_web(browser, server.url, RIGHT)
    assert wait_for_verdict(server, submission_id) == ("ACCEPTED", 1.0)
    time.sleep(2.5)  # the sender polls every second and is woken at once after a verdict
    assert (len(book.requests), len(book.token_requests)) == before
