"""The result cache: the same program is verified once; another program, problem version or seed
is verified again; a damaged entry is verified again, never trusted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from graders.config import JudgeConfig
from graders.pipeline import grade
from graders.problems.problem import Problem
from graders.verdict import Verdict
from tests.support import PROBLEMS

pytestmark = pytest.mark.jail


def _checks(report) -> list[tuple[str, bool, str]]:
    return [(c.name, c.passed, c.message) for c in report.checks if c.name != "sandbox"]


def test_the_same_program_is_verified_once(judge_config: JudgeConfig, dot_problem: Problem, tmp_path: Path) -> None:
    config = replace(judge_config, results_dir=tmp_path / "results")
    source = dot_problem.reference_path.read_text()
    first = grade(source, dot_problem, config)
    assert first.verdict == Verdict.ACCEPTED and "verify_cached" not in first.timing_ms
    assert len(list((tmp_path / "results").rglob("*.json"))) == 1
    # a comment at the end changes the source, not the normalized program or its residual notes
    again = grade(source + "\n# resubmitted\n", dot_problem, config)
    assert "verify_cached" in again.timing_ms
    assert again.verdict == first.verdict and _checks(again) == _checks(first)
    assert again.residuals == first.residuals
    # leading blank lines move the lines the residual notes name: verified again
    moved = grade("\n\n" + source, dot_problem, config)
    assert "verify_cached" not in moved.timing_ms and moved.verdict == Verdict.ACCEPTED
    # another policy is another program
    wrong = grade((PROBLEMS / "checkpoint_dot_policy" / "wrong" / "no_checkpoint.py").read_text(), dot_problem, config)
    assert "verify_cached" not in wrong.timing_ms and wrong.verdict == Verdict.WRONG_POLICY
    # another seed is other hidden inputs
    reseeded = grade(source, dot_problem, replace(config, seed=b"another-seed"))
    assert "verify_cached" not in reseeded.timing_ms


def test_a_damaged_entry_is_verified_again(judge_config: JudgeConfig, dot_problem: Problem, tmp_path: Path) -> None:
    config = replace(judge_config, results_dir=tmp_path / "results")
    source = (PROBLEMS / "checkpoint_dot_policy" / "wrong" / "everything_saveable.py").read_text()
    first = grade(source, dot_problem, config)
    assert first.verdict == Verdict.WRONG_POLICY
    [entry] = list((tmp_path / "results").rglob("*.json"))
    entry.write_text('{"event": "result", "verdict": "ACCEPTED"')  # cut short: not a result
    second = grade(source, dot_problem, config)
    assert "verify_cached" not in second.timing_ms and second.verdict == Verdict.WRONG_POLICY
