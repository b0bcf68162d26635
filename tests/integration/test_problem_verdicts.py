"""Every known-wrong submission of every problem, and its reference, through the real jail and verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig, grade
from graders.problem import ProblemRepository
from graders.verdict import Verdict
from tests.support import PROBLEMS, jail_processes

REPO = ProblemRepository(PROBLEMS)
WRONG = [(slug, path, expected) for slug in REPO.slugs() for path, expected in REPO.get(slug).wrong_submissions()]


@pytest.mark.jail
@pytest.mark.parametrize("slug", REPO.slugs())
def test_reference_is_accepted(slug: str, judge_config: JudgeConfig) -> None:
    problem = REPO.get(slug)
    report = grade(problem.reference_path.read_text(), problem, judge_config)
    assert report.verdict == Verdict.ACCEPTED, [c.message for c in report.checks if not c.passed]
    assert report.score == pytest.approx(1.0)
    assert report.residuals is not None
    assert report.residuals.submitted_bytes == report.residuals.expected_bytes
    assert jail_processes() == []


@pytest.mark.jail
@pytest.mark.parametrize("slug,path,expected", WRONG, ids=[f"{s}/{p.name}" for s, p, _ in WRONG])
def test_wrong_submission_gets_its_verdict(slug: str, path: Path, expected: str, judge_config: JudgeConfig) -> None:
    problem = REPO.get(slug)
    report = grade(path.read_text(), problem, judge_config)
    failed = [f"{c.name}: {c.message}" for c in report.checks if not c.passed]
    assert report.verdict == Verdict(expected), failed
    assert report.verdict != Verdict.ACCEPTED
    # the failing check that decided the verdict says something a student can act on
    assert failed and all(len(m) > 20 for m in failed)
    assert jail_processes() == []
