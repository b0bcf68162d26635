"""A submission queued while its problem was served, and graded after the problem was refused
(published, its snapshot gone, its folder changed: `ProblemUnavailable`), ends "failed" with no
verdict and a message that says why: not INTERNAL_ERROR, not retried, counted by no course rule
and no hint, and nothing else of it lost. Fast: the TestClient on real SQLite (migrated), a real
problems folder in a temporary copy, the real `Grader` (which never reaches a jail here)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from graders.problems.problem import ProblemRepository
from graders.problems.publication import VERSIONS, content_version, mark_published, published_version, snapshot_dir
from server.courses.rules import standing
from server.grading.grader import Grader
from server.store.courses import Policy
from server.store.submissions import SubmissionStatus
from tests.support import PROBLEMS
from tests.unit.test_course_pages import Site

SLUG = "remat_sin_sin"
SOURCE = (PROBLEMS / SLUG / "reference.py").read_text()
NOT_SERVED = "this problem is not being served right now: "
NOT_COUNTED = "; your submission was not graded and does not count"


def served_copy(tmp_path: Path) -> tuple[ProblemRepository, Path]:
    """A problems folder holding one problem, published as the folder is now (whatever edits the
    shipped folder carries), served from the snapshot made on loading."""
    root = tmp_path / "problems"
    shutil.copytree(PROBLEMS / SLUG, root / SLUG, ignore=shutil.ignore_patterns("__pycache__"))
    mark_published(root / SLUG, content_version(root / SLUG))
    repo = ProblemRepository(root)
    version = published_version(root / SLUG)
    assert version is not None and repo.get(SLUG).root == snapshot_dir(root, SLUG, version)
    return repo, root


def refuse(repo: ProblemRepository, root: Path) -> str:
    """Makes the problem refused: its snapshot removed and its folder edited. Returns why."""
    shutil.rmtree(root / VERSIONS / SLUG)
    statement = root / SLUG / "statement.md"
    statement.write_text(statement.read_text() + "\n\nA DRAFT PARAGRAPH\n")
    serving = repo.serving(SLUG)
    assert serving.root is None and serving.refusal
    return serving.refusal


def test_a_queued_submission_whose_problem_is_refused_ends_failed_with_the_reason(tmp_path: Path) -> None:
    repo, root = served_copy(tmp_path)
    site = Site(tmp_path)
    site.services.problems = repo
    student = site.account("stu@uni.example", "Stu")
    earlier = site.graded(student.id, "ACCEPTED", 1.0, datetime(2026, 1, 5, tzinfo=UTC), problem=SLUG)
    csrf = site.sign_in("stu@uni.example")
    from_page = site.client.post(
        f"/problems/{SLUG}/submit",
        data={"source": SOURCE, "csrf_token": csrf},
        headers={"Accept": "application/json"},
    )
    assert from_page.status_code == 201 and from_page.json()["status"] == "queued", from_page.text
    from_api = site.client.post(
        "/api/v1/submissions", json={"problem": SLUG, "source": SOURCE, "external_id": "attempt-7"}
    )
    assert from_api.status_code == 202, from_api.text
    queued = [from_page.json()["id"], from_api.json()["id"]]
    before = {i: site.services.submissions.get(i) for i in queued}

    reason = refuse(repo, root)
    announced: list[str] = []
    grader = Grader(
        store=site.services.submissions,
        problems=repo,
        config_factory=site.services.settings.judge_config,
        worker_id="unit-worker",
        lease_s=60,
        max_attempts=3,
        on_finished=announced.append,
    )
    assert [grader.grade(i) for i in queued] == ["refused", "refused"]
    assert announced == queued  # waiting requests and callbacks hear of it as of any verdict

    for submission_id in queued:
        record = site.services.submissions.get(submission_id)
        was = before[submission_id]
        assert record is not None and was is not None
        assert record.status == SubmissionStatus.FAILED and record.verdict is None and record.score is None
        assert (record.source, record.user_id, record.external_id, record.created_at) == (
            was.source,
            was.user_id,
            was.external_id,
            was.created_at,
        )
        assert record.attempts == 1 and record.finished_at is not None and record.lease_expires_at is None
        assert grader.grade(submission_id) == "finished"  # not graded again by itself
    message = f"{NOT_SERVED}{reason}{NOT_COUNTED}"
    assert f"`remat-judge problems publish {SLUG}`" in reason

    # the API caller reads the status and why, never INTERNAL_ERROR; the student's page says why
    answer = site.client.get(f"/api/v1/submissions/{queued[1]}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "failed" and body["verdict"] is None and body["external_id"] == "attempt-7"
    assert [(c["name"], c["passed"], c["message"]) for c in body["checks"]] == [("problem", False, message)]
    assert "INTERNAL_ERROR" not in answer.text
    polled = site.client.get(f"/submissions/{queued[0]}/status").json()
    assert polled == {"id": queued[0], "status": "failed", "verdict": None}
    panel = site.client.get(f"/submissions/{queued[0]}/panel")
    assert panel.status_code == 200 and NOT_SERVED in panel.text and NOT_COUNTED in panel.text
    assert "INTERNAL_ERROR" not in panel.text and "NOT GRADED" in panel.text
    assert site.services.leases.to_enqueue() == []  # the sweeper does not queue it again

    # the rules count verdicts: the refused one is no attempt, the earlier verdict still is
    attempts = site.services.courses.attempts([student.id], [SLUG])[(student.id, SLUG)]
    assert {a.submission_id for a in attempts} == {earlier, queued[0]}
    counted = standing(attempts, Policy())
    assert counted.attempts == 1 and counted.score == 1.0 and counted.scoring is not None
    assert counted.scoring.submission_id == earlier
    assert site.services.hints.failed_attempts(student.id, SLUG) == 0
    assert site.services.submissions.get(earlier).verdict == "ACCEPTED"  # type: ignore[union-attr]
