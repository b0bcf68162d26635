"""Every known-wrong submission of every problem, and its reference, through the real jail and verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig, grade
from graders.problem import ProblemRepository
from graders.verdict import Verdict
from tests.support import PROBLEMS, jail_processes

REPO = ProblemRepository(PROBLEMS)
# Collected from the folders without loading the packages: a broken package fails its own tests.
WRONG = [(slug, path) for slug in REPO.slugs() for path in sorted((PROBLEMS / slug / "wrong").glob("*.py"))]


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
@pytest.mark.parametrize("slug,path", WRONG, ids=[f"{s}/{p.name}" for s, p in WRONG])
def test_wrong_submission_gets_its_verdict(slug: str, path: Path, judge_config: JudgeConfig) -> None:
    problem = REPO.get(slug)
    expected = dict((p.name, v) for p, v in problem.wrong_submissions())[path.name]
    report = grade(path.read_text(), problem, judge_config)
    failed = [f"{c.name}: {c.message}" for c in report.checks if not c.passed]
    assert report.verdict == Verdict(expected), failed
    assert report.verdict != Verdict.ACCEPTED
    # the failing check that decided the verdict says something a student can act on
    assert failed and all(len(m) > 20 for m in failed)
    assert jail_processes() == []
