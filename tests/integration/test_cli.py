"""The instructor CLI, run as a user runs it: `remat-judge grade` and `remat-judge problems list`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graders.pipeline import JudgeConfig
from graders.problems.publication import todos
from tests.support import PROBLEMS

pytestmark = pytest.mark.jail
CLI = str(Path(sys.executable).parent / "remat-judge")
DOT = PROBLEMS / "checkpoint_dot_policy"


def run_cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "REMAT_JUDGE_DATA_DIR": str(data_dir),
        "REMAT_JUDGE_PROBLEMS_DIR": str(PROBLEMS),
        "COLUMNS": "200",
    }
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def run_in(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`remat-judge ARGS` in `folder` with no REMAT_JUDGE_* variable but `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("REMAT_JUDGE_")}
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, cwd=folder, timeout=120, env={**clean, "COLUMNS": "200", **env}
    )


def test_grade_exits_zero_only_for_accepted_and_prints_json(tmp_path: Path, judge_config: JudgeConfig) -> None:
    ok = run_cli("grade", str(DOT / "reference.py"), "--problem", "checkpoint_dot_policy", "--json", data_dir=tmp_path)
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)  # the folder lines go to stderr
    assert report["verdict"] == "ACCEPTED" and report["problem"] == "checkpoint_dot_policy"
    assert f"problems: {PROBLEMS} (from REMAT_JUDGE_PROBLEMS_DIR)" in ok.stderr
    assert f"data: {tmp_path.resolve()} (from REMAT_JUDGE_DATA_DIR)" in ok.stderr

    wrong = run_cli(
        "grade", str(DOT / "wrong" / "checkpoint_without_policy.py"), "-p", "checkpoint_dot_policy", data_dir=tmp_path
    )
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


def test_the_folders_come_from_the_flag_the_variable_or_the_working_directory(tmp_path: Path) -> None:
    here = tmp_path.resolve()
    made = run_in(here, "problems", "new", "from_cwd")
    assert made.returncode == 0, made.stderr
    assert (here / "problems" / "from_cwd" / "problem.toml").is_file()  # not the installed checkout's
    assert not (PROBLEMS / "from_cwd").exists()
    assert f"problems: {here / 'problems'} (from the working directory)" in made.stderr
    listed = run_in(here, "problems", "list")
    assert "from_cwd" in listed.stdout and "problems:" not in listed.stdout
    by_variable = run_in(here, "problems", "list", REMAT_JUDGE_PROBLEMS_DIR=str(PROBLEMS))
    assert "checkpoint_dot_policy" in by_variable.stdout and "from_cwd" not in by_variable.stdout
    assert f"problems: {PROBLEMS} (from REMAT_JUDGE_PROBLEMS_DIR)" in by_variable.stderr
    by_flag = run_in(
        here, "problems", "list", "--problems-dir", str(PROBLEMS), REMAT_JUDGE_PROBLEMS_DIR=str(here / "problems")
    )
    assert "checkpoint_dot_policy" in by_flag.stdout and f"problems: {PROBLEMS} (from --problems-dir)" in by_flag.stderr


def test_users_list_in_an_empty_folder_names_the_missing_database(tmp_path: Path) -> None:
    here = tmp_path.resolve()
    done = run_in(here, "users", "list")
    assert done.returncode == 2 and done.stdout == ""
    assert f"data: {here / 'data'} (from the working directory)" in done.stderr
    assert f"no judge database at sqlite:///{here / 'data' / 'remat-judge.db'}" in done.stderr
    assert not (here / "data" / "remat-judge.db").exists()


def test_publish_refuses_a_problem_with_todos_left(tmp_path: Path) -> None:
    here = tmp_path.resolve()
    assert run_in(here, "problems", "new", "unfinished").returncode == 0
    refused = run_in(here, "problems", "publish", "unfinished")
    assert refused.returncode == 1
    left = todos(here / "problems" / "unfinished")  # as many as the scaffold writes
    assert len(left) >= 5 and f"not published: {len(left)} TODOs left in unfinished" in refused.stderr
    assert 'problem.toml:4: title = "TODO: a short title"' in refused.stderr
    assert not (here / "problems" / "unfinished" / ".published").exists()
    assert run_in(here, "problems", "publish", "no_such").returncode == 2
    assert "unfinished was not published" in run_in(here, "problems", "unpublish", "unfinished").stdout


def test_grade_prints_a_submissions_text_as_text_never_as_rich_markup(
    tmp_path: Path, judge_config: JudgeConfig
) -> None:
    forged = tmp_path / "forged.py"
    forged.write_text(
        "def remat_sin_sin(x):\n"
        "    raise ValueError('[bold green]ACCEPTED[/] score 1.00 [link=https://evil.example]x[/link]')\n"
    )
    done = run_cli("grade", str(forged), "--problem", "remat_sin_sin", data_dir=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "RUNTIME_ERROR" in done.stdout
    [row] = [line for line in done.stdout.splitlines() if "sandbox" in line and "FAIL" in line]  # the checks table
    assert "[bold green]ACCEPTED[/] score 1.00" in row and "[link=https://evil.example]" in row  # printed as they are


@pytest.mark.parametrize("framework", ["flax", "nnx", "equinox"])
def test_a_framework_scaffold_validates_and_its_tree_spec_is_its_own(tmp_path: Path, framework: str) -> None:
    """`problems new --framework` writes a package that validates as it is (reference ACCEPTED in
    the real jail, the plain-JAX right/ file ACCEPTED, the unchecked block WRONG_POLICY), and
    `problems tree-spec` prints the [[args]] table its problem.toml already has."""
    here = tmp_path.resolve()
    slug = f"block_{framework}"
    made = run_in(here, "problems", "new", slug, "--framework", framework)
    assert made.returncode == 0, made.stderr
    validated = run_in(here, "problems", "validate", slug)
    assert validated.returncode == 0, validated.stdout[-3000:] + validated.stderr[-2000:]
    assert validated.stdout.count(" ok ") == 3 and "MISMATCH" not in validated.stdout
    printed = run_in(here, "problems", "tree-spec", slug)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith('[[args]]\nname = "params"\nkind = "tree"\n')
    assert printed.stdout in (here / "problems" / slug / "problem.toml").read_text()


def test_a_mesh_scaffold_validates_and_new_refuses_a_mesh_it_cannot_make(tmp_path: Path) -> None:
    """`problems new --mesh data=2,model=2` writes a package on a 2x2 mesh that validates as it is
    (reference and right/ ACCEPTED through the real jail on 4 of its simulated devices, the
    unchecked function WRONG_POLICY); a mesh past 8 devices, a malformed one, or one with a
    framework is refused with a usage error."""
    here = tmp_path.resolve()
    made = run_in(here, "problems", "new", "on_mesh", "--mesh", "data=2,model=2")
    assert made.returncode == 0, made.stderr
    toml = (here / "problems" / "on_mesh" / "problem.toml").read_text()
    assert '[mesh]\naxes = { data = 2, model = 2 }\n\n[mesh.partition]\nx = ["data"]\n' in toml
    validated = run_in(here, "problems", "validate", "on_mesh")
    assert validated.returncode == 0, validated.stdout[-3000:] + validated.stderr[-2000:]
    assert validated.stdout.count(" ok ") == 3 and "MISMATCH" not in validated.stdout
    for mesh, says in (
        ("data=3,model=3", "9 devices; at most 8"),
        ("data:2", "write each axis as name=size"),
        ("data=2,data=2", "axis 'data' is named twice"),
    ):
        refused = run_in(here, "problems", "new", "other", "--mesh", mesh)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    both = run_in(here, "problems", "new", "other", "--mesh", "data=2", "--framework", "flax")
    assert both.returncode == 2 and "choose one" in both.stderr
    assert not (here / "problems" / "other").exists()


def test_tree_spec_and_new_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    here = tmp_path.resolve()
    refused = run_in(here, "problems", "new", "torch_block", "--framework", "torch")
    assert refused.returncode == 2 and "choose one of flax, nnx, equinox" in refused.stderr
    assert run_in(here, "problems", "new", "plain").returncode == 0
    no_init = run_in(here, "problems", "tree-spec", "plain")  # the plain scaffold's reference has no init
    assert no_init.returncode == 1 and "defines no init" in no_init.stderr
    assert run_in(here, "problems", "tree-spec", "nowhere").returncode == 2


def test_problems_frontier_prints_each_cases_budgets_and_least_recomputation(tmp_path: Path) -> None:
    """budget_uneven_chain: the weights and x alone are 573,440 bytes in `large` (everything
    recomputed: one forward pass), and within its budget of 640,000 bytes the least any policy
    recomputes is 8,454,144 FLOPs, the figure its statement gives."""
    done = run_cli("problems", "frontier", "budget_uneven_chain", data_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "case 'small'" in out and "case 'large'" in out and "least recompute FLOPs" in out
    assert "573,440" in out and "17,907,712" in out  # the fewest bytes: everything recomputed
    assert "638,976" in out and "8,454,144" in out  # the row just under the budget
    refused = run_cli("problems", "frontier", "fsdp_regather", data_dir=tmp_path)
    assert refused.returncode == 1 and "mesh" in refused.stderr
    missing = run_cli("problems", "frontier", "no_such_problem", data_dir=tmp_path)
    assert missing.returncode == 2


def test_a_budget_scaffold_validates_with_its_scores_and_its_frontier_shows_the_budget(tmp_path: Path) -> None:
    """`problems new --budget` writes an open problem that validates as it is: reference and right/
    ACCEPTED with the scores their `# score:` lines give (the optimum 1.0, everything recomputed
    below 1), wrong/ over the budget WRONG_POLICY; its frontier has the rows its budgets sit
    between; --budget with a mesh or a framework is refused."""
    here = tmp_path.resolve()
    made = run_in(here, "problems", "new", "open_chain", "--budget")
    assert made.returncode == 0, made.stderr
    folder = here / "problems" / "open_chain"
    assert 'rule = "budget"' in (folder / "problem.toml").read_text()
    assert "# score: 1.0" in (folder / "right" / "optimal_decorator.py").read_text()
    validated = run_in(here, "problems", "validate", "open_chain")
    assert validated.returncode == 0, validated.stdout[-3000:] + validated.stderr[-2000:]
    assert validated.stdout.count(" ok ") == 5 and "MISMATCH" not in validated.stdout
    frontier = run_in(here, "problems", "frontier", "open_chain")
    assert frontier.returncode == 0, frontier.stderr
    assert "311,296" in frontier.stdout and "327,680" in frontier.stdout  # the large budget, 320,000, between
    assert "the schedules measured" in frontier.stdout and "every layer" in frontier.stdout  # its SCHEDULES
    for extra in (["--mesh", "data=2"], ["--framework", "flax"]):
        refused = run_in(here, "problems", "new", "other", "--budget", *extra)
        assert refused.returncode == 2 and "--budget alone" in refused.stderr


def test_courses_board_sets_names_and_shows_the_board(tmp_path: Path) -> None:
    assert run_cli("db", "upgrade", data_dir=tmp_path).returncode == 0
    assert run_cli("courses", "create", "rm-101", "--title", "Remat 101", data_dir=tmp_path).returncode == 0
    shown = run_cli("courses", "board", "rm-101", "names", data_dir=tmp_path)
    assert shown.returncode == 0 and "display names" in shown.stdout, shown.stderr
    hidden = run_cli("courses", "board", "rm-101", "anonymous", data_dir=tmp_path)
    assert hidden.returncode == 0 and "their own row only" in hidden.stdout
    assert run_cli("courses", "board", "rm-101", "maybe", data_dir=tmp_path).returncode == 2
    board = run_cli("courses", "board-show", "rm-101", "budget_uneven_chain", data_dir=tmp_path)
    assert board.returncode == 0 and "rm-101: budget_uneven_chain" in board.stdout, board.stderr
    assert run_cli("courses", "board-show", "no-course", "x", data_dir=tmp_path).returncode == 2
