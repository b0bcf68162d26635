"""A fault of the judge is INTERNAL_ERROR, is retried once, and never blames the submission."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

import graders.verifier.client
from graders.pipeline import JudgeConfig, grade
from graders.problems.problem import Problem
from graders.reference.expectation import META_FILE, cache_dir
from graders.verdict import Verdict
from sandbox.ready import ReadyChildren
from sandbox.templates import Templates, TemplateSpec
from tests.support import jail_processes

pytestmark = pytest.mark.jail

NO_VERIFIER = "no verifier program here"


def unstartable_verifier(starts: Path) -> Templates:
    """A verifier template set whose program exits at once, before it says it is ready: every start
    fails, whatever ran before on this worker (each start appends a line to `starts`)."""
    exits_at_once = f"import sys; open(sys.argv[1], 'a').write('start\\n'); sys.exit({NO_VERIFIER!r})"
    spec = TemplateSpec(name="verifier", argv=lambda: [sys.executable, "-I", "-c", exits_at_once, str(starts)])
    return Templates(spec, max_forks=1)


def test_a_verifier_that_cannot_start_is_internal_error_retried_once(
    judge_config: JudgeConfig, dot_problem: Problem, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The fault is the template's program itself, not a deadline: no template started earlier and no
    # child waiting on this worker can make it succeed. Everything above the program is the
    # production path: Verifier.start, its ready children, Child.start, the template set's own retry.
    starts = tmp_path / "starts"
    templates = unstartable_verifier(starts)
    broken = ReadyChildren(lambda: templates)
    monkeypatch.setattr(graders.verifier.client, "verifier_ready", lambda: broken)
    attempts: list[int] = []
    report = grade(dot_problem.reference_path.read_text(), dot_problem, judge_config, on_attempt=attempts.append)
    assert report.verdict == Verdict.INTERNAL_ERROR
    assert attempts == [0, 1]
    assert starts.read_text().count("start") >= 2  # each attempt really tried to start a verifier
    assert report.score == 0.0
    assert report.checks[0].message == "the judge failed; this is not your fault"
    internal = report.checks[0].internal["error"]
    assert "did not start" in internal and NO_VERIFIER in internal
    public = report.model_dump_json()  # what students and API callers get
    for secret in ("did not start", NO_VERIFIER, "internal", "Traceback"):
        assert secret not in public
    assert "did not start" in report.stored_json()  # kept for instructors
    assert jail_processes() == []


def test_a_missing_cache_directory_is_rebuilt_not_blamed(
    judge_config: JudgeConfig, dot_problem: Problem, tmp_path: Path
) -> None:
    # Generous time: the reference's export budget and the submission's wall time are the jail's
    # 10 s by default, which a loaded machine can miss; this test is about the cache, not the clock.
    patient = replace(judge_config.jail_limits, wall_time_limit_s=120.0)
    fresh = replace(judge_config, cache_dir=tmp_path / "new-cache", jail_limits=patient)
    report = grade(dot_problem.reference_path.read_text(), dot_problem, fresh)
    assert report.verdict == Verdict.ACCEPTED, report.checks
    # built in this test, not found: the directory did not exist, and no child prepared for it waits
    assert (cache_dir(fresh.cache_dir, dot_problem, fresh.seed) / META_FILE).is_file()
