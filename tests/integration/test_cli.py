"""The instructor CLI, run as a user runs it: `remat-judge grade` and `remat-judge problems list`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig
from tests.support import PROBLEMS

pytestmark = pytest.mark.jail
CLI = str(Path(sys.executable).parent / "remat-judge")
DOT = PROBLEMS / "checkpoint_dot_policy"


def run_cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REMAT_JUDGE_DATA_DIR": str(data_dir), "COLUMNS": "200"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def test_grade_exits_zero_only_for_accepted_and_prints_json(tmp_path: Path, judge_config: JudgeConfig) -> None:
    ok = run_cli("grade", str(DOT / "reference.py"), "--problem", "checkpoint_dot_policy", "--json", data_dir=tmp_path)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["verdict"] == "ACCEPTED" and report["problem"] == "checkpoint_dot_policy"

    wrong = run_cli("grade", str(DOT / "wrong" / "checkpoint_without_policy.py"), "-p", "checkpoint_dot_policy",
                    data_dir=tmp_path)
    assert wrong.returncode == 1
    assert "WRONG_POLICY" in wrong.stdout
    assert "the required policy saves (large): 5 residuals" in wrong.stdout
    assert "yours saves (large): 3 residuals" in wrong.stdout
    # the seed it generated is private to the data directory
    assert (tmp_path / "hidden_seed").stat().st_mode & 0o077 == 0


def test_grade_usage_errors_exit_two(tmp_path: Path) -> None:
    missing = run_cli("grade", str(tmp_path / "nope.py"), "-p", "checkpoint_dot_policy", data_dir=tmp_path)
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    (tmp_path / "a.py").write_text("x = 1\n")
    unknown = run_cli("grade", str(tmp_path / "a.py"), "-p", "no_such_problem", data_dir=tmp_path)
    assert unknown.returncode == 2 and "no problem 'no_such_problem'" in unknown.stderr


def test_problems_list_shows_every_problem(tmp_path: Path) -> None:
    listing = run_cli("problems", "list", data_dir=tmp_path)
    assert listing.returncode == 0
    for slug in sorted(p.name for p in PROBLEMS.iterdir() if (p / "problem.toml").exists()):
        assert slug in listing.stdout
