"""An author's mistakes through `remat-judge problems validate`, as an instructor runs it (real jail
and verifier): the reference checks itself first, and a failure stops validation before any
`right/` or `wrong/` file is graded (so no student's file is blamed), exits 1, and prints one line
per failed self-check, `reference.py: <check>: <message>`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig
from tests.support import PROBLEMS
from tests.unit.test_reference_checks import MISTAKES

pytestmark = pytest.mark.jail
CLI = str(Path(sys.executable).parent / "remat-judge")


def validate(problems: Path, data: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMAT_JUDGE_")}
    return subprocess.run(
        [CLI, "problems", "validate", "remat_sin_sin", "--problems-dir", str(problems), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.mark.parametrize("check", ["finite_difference", "deterministic", "time_limit"])
def test_validate_stops_at_the_reference_and_says_why(tmp_path: Path, judge_config: JudgeConfig, check: str) -> None:
    root = tmp_path / "problems" / "remat_sin_sin"
    shutil.copytree(PROBLEMS / "remat_sin_sin", root)
    (root / "reference.py").write_text(MISTAKES[check].replace("time.sleep(0.6)", "time.sleep(2.5)"))
    if check == "time_limit":  # the package gives submissions 2 s in the jail; the reference needs more
        text = (root / "problem.toml").read_text()
        (root / "problem.toml").write_text(text + "\n[limits]\nwall_time_limit_s = 2\n")
    done = validate(tmp_path / "problems", tmp_path / "data")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("reference.py: ")]
    assert lines and lines[0].startswith(f"reference.py: {check}: "), done.stdout
    assert "wrong/" not in done.stdout and "right/" not in done.stdout  # nothing was graded, nobody blamed
    if check == "time_limit":
        assert re.search(r"wall_time_limit_s", lines[0])


def test_the_banks_reference_validates(tmp_path: Path, judge_config: JudgeConfig) -> None:
    root = tmp_path / "problems" / "remat_sin_sin"
    shutil.copytree(PROBLEMS / "remat_sin_sin", root)
    done = validate(tmp_path / "problems", tmp_path / "data")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reference.py" in done.stdout and "reference.py: " not in done.stdout


def test_validate_lists_the_toml_expect_line_and_file_errors_together(tmp_path: Path) -> None:
    """Two misspelt keys in problem.toml, a bad `# expect:` line and a misplaced file: one run
    prints every one of them and grades nothing (the reference needs a valid toml to run)."""
    root = tmp_path / "problems" / "remat_sin_sin"
    shutil.copytree(PROBLEMS / "remat_sin_sin", root)
    toml = (root / "problem.toml").read_text()
    toml = toml.replace("title = ", 'titel = "x"\ntitle = ', 1).replace(
        "difficulty = ", 'dificulty = "easy"\ndifficulty = ', 1
    )
    (root / "problem.toml").write_text(toml)
    (root / "wrong" / "no_checkpoint.py").write_text("# expect: WRONG_POLCY\nimport jax\n")
    (root / "hint.md").write_text("## A hint\n")
    done = validate(tmp_path / "problems", tmp_path / "data")
    assert done.returncode == 1, done.stdout + done.stderr
    for expected in (
        "remat_sin_sin/problem.toml: titel: unknown key (did you mean 'title'?)",
        "remat_sin_sin/problem.toml: dificulty: unknown key (did you mean 'difficulty'?)",
        "remat_sin_sin/wrong/no_checkpoint.py: the first line must be `# expect: VERDICT`",
        "(did you mean WRONG_POLICY?)",
        "remat_sin_sin/hint.md: not a package file (did you mean hints.md?)",
    ):
        assert expected in done.stderr, done.stderr
    assert "reference.py" not in done.stdout  # nothing graded
