"""`remat-judge courses assign` run as an instructor runs it: without --opens the assignment opens
the moment it is assigned, stored, and the gradebook counts only attempts from then on (README,
"Courses, deadlines, gradebook": earlier attempts do not count)."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine

from server.store.accounts import UserStore
from server.store.course_store import CourseStore
from server.store.db import make_engine
from server.store.submissions import SubmissionStore
from tests.support import PROBLEMS

CLI = str(Path(sys.executable).parent / "remat-judge")
SLUG = "checkpoint_dot_policy"


def remat_judge(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMAT_JUDGE_")}
    env |= {"REMAT_JUDGE_DATA_DIR": str(data_dir), "REMAT_JUDGE_PROBLEMS_DIR": str(PROBLEMS), "COLUMNS": "200"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def graded(engine: Engine, user_id: int, verdict: str, score: float) -> str:
    """A submission stored now and graded as a worker does."""
    store = SubmissionStore(engine)
    record = store.create(problem=SLUG, source="x = 1", user_id=user_id)
    assert store.claim(record.id, worker_id="w", lease_s=60, max_attempts=3).record is not None
    assert store.finish(record.id, verdict=verdict, score=score, problem_version="v0", result_json="{}", worker_id="w")
    return record.id


def gradebook_row(data_dir: Path) -> dict[str, str]:
    shown = remat_judge("courses", "gradebook", "rm-1", "--csv", "-", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr
    [row] = list(csv.DictReader(io.StringIO(shown.stdout)))
    return row


def test_an_attempt_before_courses_assign_does_not_count_and_one_after_does(tmp_path: Path) -> None:
    assert remat_judge("db", "upgrade", data_dir=tmp_path).returncode == 0
    assert remat_judge("courses", "create", "rm-1", "--title", "Remat 1", data_dir=tmp_path).returncode == 0
    engine = make_engine(f"sqlite:///{tmp_path.resolve() / 'remat-judge.db'}")
    try:
        ada = UserStore(engine).create(email="ada@uni.example", display_name="Ada", password_hash="x")
        enrolled = remat_judge("courses", "enroll", "rm-1", "ada@uni.example", "--role", "student", data_dir=tmp_path)
        assert enrolled.returncode == 0, enrolled.stderr
        graded(engine, ada.id, "ACCEPTED", 1.0)  # before the problem is assigned

        before = datetime.now(UTC)
        assigned = remat_judge("courses", "assign", "rm-1", SLUG, data_dir=tmp_path)
        assert assigned.returncode == 0, assigned.stderr
        course = CourseStore(engine).get("rm-1")
        assert course is not None
        assignment = CourseStore(engine).assignment(course.id, SLUG)
        assert assignment is not None and assignment.opens_at is not None  # stored, not "open from the start"
        assert before <= assignment.opens_at <= datetime.now(UTC)
        # it prints the opening time it stored
        assert f"opens {assignment.opens_at:%Y-%m-%d %H:%M:%S} UTC" in assigned.stdout, assigned.stdout
        row = gradebook_row(tmp_path)
        assert (row["score"], row["attempts"]) == ("", "0"), row  # the earlier ACCEPTED does not count

        graded(engine, ada.id, "WRONG_POLICY", 0.25)  # after: it counts
        row = gradebook_row(tmp_path)
        assert (row["score"], row["attempts"]) == ("0.2500", "1"), row

        # changing the assignment's rules later keeps its opening time
        changed = remat_judge("courses", "assign", "rm-1", SLUG, "--due", "2099-01-01T00:00", data_dir=tmp_path)
        assert changed.returncode == 0, changed.stderr
        assert re.search(rf"opens {assignment.opens_at:%Y-%m-%d %H:%M:%S} UTC, due 2099", changed.stdout)
        kept = CourseStore(engine).assignment(course.id, SLUG)
        assert kept is not None and kept.opens_at == assignment.opens_at
        assert gradebook_row(tmp_path)["attempts"] == "1"

        # a deadline already past is refused for a new assignment that would open now
        past = remat_judge("courses", "assign", "rm-1", "remat_sin_sin", "--due", "2020-01-01", data_dir=tmp_path)
        assert past.returncode != 0 and "the deadline is already past" in past.stderr
        explicit = remat_judge(
            "courses", "assign", "rm-1", "remat_sin_sin", "--opens", "2019-12-01", "--due", "2020-01-01",
            data_dir=tmp_path,
        )  # fmt: skip
        assert explicit.returncode == 0 and "opens 2019-12-01 00:00:00 UTC" in explicit.stdout, explicit.stderr
    finally:
        engine.dispose()
