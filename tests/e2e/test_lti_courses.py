"""Courses and regrades seen from the LMS, through a real server process
and the simulated platform and gradebook: a student's launch makes the course and enrolls them;
a new deadline with a late penalty, set with the CLI, re-sends the changed score; after the
problem changes, `remat-judge problems regrade` grades the submission again, lists the changed
verdict and the gradebook receives the new score with a newer timestamp."""

from __future__ import annotations

import csv
import io
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.e2e.test_lti_grade_passback import RIGHT, SCORE_SCOPE, SLUG, submit_on_the_web, wait_for_verdict, wait_until
from tests.lti_gradebook import Gradebook
from tests.lti_platform import Browser, Platform, start_gradebook, start_tool
from tests.support import PROBLEMS, Server, remat_judge

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def problems_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("problems")
    shutil.copytree(PROBLEMS / SLUG, root / SLUG)
    shutil.copytree(PROBLEMS / "remat_constant", root / "remat_constant")
    (root / "remat_constant" / ".published").unlink()  # an instructor's problem not published yet
    return root


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    lms = Platform(client_id="courses-client")
    yield lms
    lms.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, platform: Platform, problems_dir: Path) -> Iterator[Server]:
    srv = start_tool(
        tmp_path_factory.mktemp("lti-courses"),
        platform,
        workers=1,
        env={"REMAT_JUDGE_LTI_ALLOW_NETWORKS": '["127.0.0.0/8"]', "REMAT_JUDGE_PROBLEMS_DIR": str(problems_dir)},
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def book(server: Server, platform: Platform) -> Iterator[Gradebook]:
    gradebook = start_gradebook(server, platform)
    yield gradebook
    gradebook.stop()


def test_deadline_change_and_regrade_reach_the_lms_gradebook(
    server: Server, platform: Platform, book: Gradebook, problems_dir: Path
) -> None:
    sub = "student-courses-1"
    platform.with_launch(
        sub=sub,
        name="Grace Student",
        email="grace@uni.example",
        ags={"scope": [SCORE_SCOPE], "lineitem": book.lineitem_url("9")},
    )
    browser = Browser(server.url)
    try:
        assert browser.launch(platform).response.status_code == 200
        right_id = submit_on_the_web(browser.client, server.url, RIGHT)
        assert wait_for_verdict(server, right_id) == ("ACCEPTED", 1.0)
    finally:
        browser.close()
    wait_until(lambda: [s["scoreGiven"] for s in book.accepted("9", sub)] == [1.0])

    # the launch made the course of the LMS context and enrolled the student
    env = dict(os.environ)
    listed = remat_judge("courses", "list", "--data-dir", str(server.data_dir), env=env)
    assert listed.returncode == 0 and "JAX course" in listed.stdout and "course-42" in listed.stdout
    key = next(word for word in listed.stdout.split() if word.startswith("lti-"))

    # a deadline two hours ago with 50% off per started day: the accepted attempt is late now
    due = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S")
    assigned = remat_judge(
        "courses",
        "assign",
        key,
        SLUG,
        "--due",
        due,
        "--penalty-per-day",
        "0.5",
        "--data-dir",
        str(server.data_dir),
        "--problems-dir",
        str(problems_dir),
        env=env,
    )
    assert assigned.returncode == 0, assigned.stdout + assigned.stderr
    wait_until(lambda: [s["scoreGiven"] for s in book.accepted("9", sub)] == [1.0, 0.5])
    exported = remat_judge("courses", "gradebook", key, "--csv", "-", "--data-dir", str(server.data_dir), env=env)
    [row] = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert (row["email"], row["score"], row["late"], row["attempts"]) == ("grace@uni.example", "0.5000", "yes", "1")

    # the problem's new version rejects the old answer: editing the folder changes nothing for students
    # until it is published (validated); then the regrade grades against it and sends the changed grade
    reference = problems_dir / SLUG / "reference.py"
    reference.write_text(reference.read_text().replace("jnp.sin(jnp.sin(v))", "jnp.sin(jnp.sin(v)) + 1.0"))
    for folder in ("right", "wrong"):  # written for the old version
        shutil.rmtree(problems_dir / SLUG / folder)
    unpublished = remat_judge(
        "problems",
        "regrade",
        SLUG,
        "--timeout",
        "240",
        "--data-dir",
        str(server.data_dir),
        "--problems-dir",
        str(problems_dir),
        env=env,
    )
    assert unpublished.returncode == 0 and "1 of 1 graded again; 0 changed" in unpublished.stdout
    published = remat_judge(
        "problems",
        "publish",
        SLUG,
        "--data-dir",
        str(server.data_dir),
        "--problems-dir",
        str(problems_dir),
        env=env,
        timeout_s=600,
    )
    assert published.returncode == 0, published.stdout + published.stderr
    regraded = remat_judge(
        "problems",
        "regrade",
        SLUG,
        "--timeout",
        "240",
        "--data-dir",
        str(server.data_dir),
        "--problems-dir",
        str(problems_dir),
        env=env,
    )
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert "1 of 1 graded again; 1 changed" in regraded.stdout and right_id in regraded.stdout
    assert "ACCEPTED" in regraded.stdout and "WRONG" in regraded.stdout
    wait_until(lambda: len(book.accepted("9", sub)) == 3)
    scores = book.accepted("9", sub)
    assert [s["scoreGiven"] for s in scores] == [1.0, 0.5, 0.0]  # the unpublished edit sent nothing
    stamps = [int(datetime.fromisoformat(s["timestamp"]).timestamp()) for s in scores]
    assert stamps[0] < stamps[1] < stamps[2]
    submitted = scores[2]["https://canvas.instructure.com/lti/submission"]["submittedAt"]
    assert datetime.fromisoformat(submitted) < datetime.fromisoformat(scores[2]["timestamp"])  # the student's time


def test_a_student_cannot_launch_an_unpublished_problem(server: Server, platform: Platform, book: Gradebook) -> None:
    platform.with_launch(sub="student-courses-2", problem="remat_constant")
    browser = Browser(server.url)
    try:
        refused = browser.launch(platform).response
        assert refused.status_code == 404 and "not published yet" in refused.text
    finally:
        browser.close()
