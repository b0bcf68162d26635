"""A fault of the judge is INTERNAL_ERROR, is retried once, and never blames the submission."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graders.pipeline import JudgeConfig, grade
from graders.problems.problem import Problem
from graders.verdict import Verdict
from tests.support import jail_processes

pytestmark = pytest.mark.jail


def test_a_verifier_that_cannot_start_is_internal_error_retried_once(
    judge_config: JudgeConfig, dot_problem: Problem
) -> None:
    broken = replace(judge_config, verify_startup_time_limit_s=0.001)  # the verifier never gets ready in time
    attempts: list[int] = []
    report = grade(dot_problem.reference_path.read_text(), dot_problem, broken, on_attempt=attempts.append)
    assert report.verdict == Verdict.INTERNAL_ERROR
    assert attempts == [0, 1]
    assert report.score == 0.0
    assert report.checks[0].message == "the judge failed; this is not your fault"
    assert "did not start" in report.checks[0].internal["error"]
    public = report.model_dump_json()  # what students and API callers get
    assert "did not start" not in public and "internal" not in public and "Traceback" not in public
    assert "did not start" in report.stored_json()  # kept for instructors
    assert jail_processes() == []


def test_a_missing_cache_directory_is_rebuilt_not_blamed(
    judge_config: JudgeConfig, dot_problem: Problem, tmp_path: pytest.TempPathFactory
) -> None:
    fresh = replace(judge_config, cache_dir=tmp_path / "new-cache")  # type: ignore[operator]
    report = grade(dot_problem.reference_path.read_text(), dot_problem, fresh)
    assert report.verdict == Verdict.ACCEPTED
