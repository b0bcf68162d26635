"""graders/problems/problem.py: loading and validating packages, versions, hidden inputs, wrong submissions."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from graders.problems.generators import UniformGenerator
from graders.problems.hidden_inputs import case_arg_specs, hidden_inputs, leaf_names
from graders.problems.problem import Problem, check_package, load_problem
from graders.problems.spec import ArrayArg, ProblemError
from graders.verdict import Verdict

DOT_POLICY_DIR = Path(__file__).resolve().parents[2] / "problems" / "checkpoint_dot_policy"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A private copy of the real package, safe to edit."""
    root = tmp_path / "checkpoint_dot_policy"
    shutil.copytree(DOT_POLICY_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def edit_toml(root: Path, pattern: str, replacement: str) -> Path:
    path = root / "problem.toml"
    text, n = re.subn(pattern, replacement, path.read_text(encoding="utf-8"), count=1, flags=re.M)
    assert n == 1, f"pattern {pattern!r} not found in problem.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --- the real package -------------------------------------------------------------------------------


def test_real_package_loads_with_its_cases_and_exact_rule(dot_problem: Problem) -> None:
    spec = dot_problem.spec
    assert spec.slug == dot_problem.root.name == "checkpoint_dot_policy"
    assert spec.entry_point == "checkpoint_dot_policy"
    assert [a.name for a in spec.args] == ["w1", "w2", "x"]
    assert [c.name for c in spec.cases] == ["small", "rectangular", "large"]
    assert spec.memory.rule == "exact"
    assert re.fullmatch(r"[0-9a-f]{12}", dot_problem.version)
    assert "checkpoint" in dot_problem.statement
    assert "def checkpoint_dot_policy" in dot_problem.starter
    assert leaf_names(spec) == ["w1", "w2", "x"]


def test_case_arg_specs_resolve_named_dims(dot_problem: Problem) -> None:
    small = dot_problem.spec.cases[0]
    assert case_arg_specs(dot_problem.spec, small) == [
        {"kind": "array", "name": "w1", "shape": [4, 4], "dtype": "float32"},
        {"kind": "array", "name": "w2", "shape": [4, 4], "dtype": "float32"},
        {"kind": "array", "name": "x", "shape": [8, 4], "dtype": "float32"},
    ]


# --- versions ---------------------------------------------------------------------------------------


def test_version_is_content_based_and_stable_across_copies(dot_problem: Problem, package: Path) -> None:
    assert load_problem(package).version == dot_problem.version
    assert load_problem(package).version == load_problem(package).version


def test_version_changes_when_reference_changes(package: Path) -> None:
    before = load_problem(package).version
    ref = package / "reference.py"
    ref.write_text(ref.read_text(encoding="utf-8") + "\n# a changed reference is a new version\n", encoding="utf-8")
    assert load_problem(package).version != before


def test_version_changes_when_problem_toml_changes(package: Path) -> None:
    before = load_problem(package).version
    edit_toml(package, r"^inputs_per_case = 3", "inputs_per_case = 4")
    assert load_problem(package).version != before


def test_the_version_is_the_content_students_get_and_grading_uses(package: Path) -> None:
    """A published version is a content-addressed snapshot: any file a student reads or grading
    uses makes a new version; the author's right/ and wrong/ files do not."""
    before = load_problem(package).version
    (package / "wrong").mkdir(exist_ok=True)
    (package / "wrong" / "extra.py").write_text("# expect: WRONG_ANSWER\n", encoding="utf-8")
    assert load_problem(package).version == before
    (package / "statement.md").write_text("A reworded statement.\n", encoding="utf-8")
    assert load_problem(package).version != before


# --- validation errors name the file and the field -----------------------------------------------


def assert_problem_error(root: Path, *field_and_words: str) -> str:
    with pytest.raises(ProblemError) as info:
        load_problem(root)
    message = str(info.value)
    assert f"{root.name}/problem.toml" in message and str(root.parent) not in message  # never a server path
    for word in field_and_words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


def test_unknown_difficulty_is_rejected_naming_the_field(package: Path) -> None:
    edit_toml(package, r'^difficulty = "medium"', 'difficulty = "impossible"')
    assert_problem_error(package, "problem.toml: difficulty:", "'easy', 'medium' or 'hard'")


def test_case_missing_a_dim_is_rejected_naming_the_cases_field(package: Path) -> None:
    edit_toml(package, r"^dims = \{ d = 4, N = 8 \}", "dims = { d = 4 }")
    message = assert_problem_error(package, "'small'", "['N']")
    # The location must point into [[cases]], like every other field error does, not "(top level)".
    assert re.search(r"problem\.toml: cases\b", message), message


def test_scoring_weights_not_summing_to_one_are_rejected(package: Path) -> None:
    edit_toml(package, r"^value = 0.34", "value = 0.5")
    assert_problem_error(package, "problem.toml: scoring:", "must sum to 1")


def test_unknown_top_level_key_is_rejected(package: Path) -> None:
    edit_toml(package, r"^title = ", 'colour = "red"\ntitle = ')
    assert_problem_error(package, "problem.toml: colour: unknown key")


def test_unknown_nested_key_is_rejected_with_its_path(package: Path) -> None:
    edit_toml(package, r"^atol = 1e-5", "atol = 1e-5\natoll = 3")
    assert_problem_error(package, "problem.toml: tolerance.float32.atoll: unknown key (did you mean 'atol'?)")


def test_every_error_at_once_with_did_you_mean_for_misspelt_keys(package: Path) -> None:
    edit_toml(package, r"^title = ", 'titel = "x"\nentry_pont = "f"\ntitle = ')
    edit_toml(package, r'^difficulty = "medium"', 'difficulty = "impossible"\nodrer = 3')
    text = (package / "problem.toml").read_text() + "\n[limits]\nwall_time_limit = 5\n"
    (package / "problem.toml").write_text(text)
    message = assert_problem_error(
        package,
        "titel: unknown key (did you mean 'title'?)",
        "entry_pont: unknown key (did you mean 'entry_point'?)",
        "odrer: unknown key (did you mean 'order'?)",
        "limits.wall_time_limit: unknown key (did you mean 'wall_time_limit_s'?)",
        "difficulty:",
    )
    assert len(message.splitlines()) == 5


def test_an_unknown_dtype_is_rejected_naming_the_argument_index(package: Path) -> None:
    edit_toml(package, r'^dtype = "float32"', 'dtype = "int8"')
    assert_problem_error(package, "problem.toml: args.0.", "dtype")


def test_an_integer_argument_drawn_from_a_float_generator_is_rejected(package: Path) -> None:
    edit_toml(package, r'^dtype = "float32"', 'dtype = "int32"')
    assert_problem_error(package, "problem.toml: args.0", 'generator = { kind = "random_bits" }')


def test_duplicate_case_names_are_rejected(package: Path) -> None:
    edit_toml(package, r'^name = "rectangular"', 'name = "small"')
    assert_problem_error(package, "problem.toml: cases:", "unique")


def test_slug_must_equal_folder_name(package: Path) -> None:
    edit_toml(package, r'^slug = "checkpoint_dot_policy"', 'slug = "other_name"')
    assert_problem_error(package, "slug:", "'checkpoint_dot_policy'")


def test_invalid_toml_is_a_problem_error(package: Path) -> None:
    edit_toml(package, r"^title = ", "title = = ")
    assert_problem_error(package, "not valid TOML")


def test_missing_reference_is_a_problem_error(package: Path) -> None:
    (package / "reference.py").unlink()
    with pytest.raises(ProblemError, match="missing reference.py"):
        load_problem(package)


# --- hidden inputs ----------------------------------------------------------------------------------


def test_hidden_inputs_are_deterministic_for_the_same_seed(dot_problem: Problem) -> None:
    case = dot_problem.spec.cases[1]
    a = hidden_inputs(dot_problem.spec, case, seed=b"seed-1", version=dot_problem.version, index=0)
    b = hidden_inputs(dot_problem.spec, case, seed=b"seed-1", version=dot_problem.version, index=0)
    assert [x.shape for x in a] == [(16, 16), (16, 16), (40, 16)]
    assert all(x.dtype == np.float32 for x in a)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_hidden_inputs_differ_for_another_seed_index_or_version(dot_problem: Problem) -> None:
    case = dot_problem.spec.cases[1]
    base = hidden_inputs(dot_problem.spec, case, seed=b"seed-1", version=dot_problem.version, index=0)
    others = [
        hidden_inputs(dot_problem.spec, case, seed=b"seed-2", version=dot_problem.version, index=0),
        hidden_inputs(dot_problem.spec, case, seed=b"seed-1", version=dot_problem.version, index=1),
        hidden_inputs(dot_problem.spec, case, seed=b"seed-1", version="000000000000", index=0),
    ]
    for other in others:
        for x, y in zip(base, other, strict=True):
            assert x.shape == y.shape
            assert not np.any(x == y)


def test_hidden_inputs_follow_each_arguments_generator(dot_problem: Problem) -> None:
    large = dot_problem.spec.cases[2]
    w1, w2, x = hidden_inputs(dot_problem.spec, large, seed=b"s", version=dot_problem.version, index=0)
    # problem.toml: w1, w2 ~ N(0, 0.5^2) of shape [256, 256]; x ~ N(0, 1) of shape [1024, 256]
    assert abs(float(w1.std()) - 0.5) < 0.01 and abs(float(w1.mean())) < 0.01
    assert abs(float(x.std()) - 1.0) < 0.01


def test_uniform_generator_stays_within_its_bounds(package: Path) -> None:
    edit_toml(
        package,
        r"^generator = \{ kind = \"normal\", scale = 1.0 \}",
        'generator = { kind = "uniform", low = 2.0, high = 3.0 }',
    )
    problem = load_problem(package)
    assert isinstance(problem.spec.args[2], ArrayArg)
    assert isinstance(problem.spec.args[2].generator, UniformGenerator)
    x = hidden_inputs(problem.spec, problem.spec.cases[1], seed=b"s", version=problem.version, index=0)[2]
    assert x.min() >= 2.0 and x.max() < 3.0


# --- wrong submissions ------------------------------------------------------------------------------


def test_wrong_submissions_of_real_package_parse(dot_problem: Problem) -> None:
    found = {path.name: verdict for path, verdict in dot_problem.wrong_submissions()}
    assert found["no_checkpoint.py"] == "WRONG_POLICY"
    assert found["wrong_math.py"] == "WRONG_ANSWER"
    assert found["stop_gradient_weight.py"] == "WRONG_GRADIENT"
    assert found["syntax_error.py"] == "COMPILE_ERROR"
    assert set(found.values()) <= set(Verdict.__members__)
    assert len(found) == len(list((dot_problem.root / "wrong").glob("*.py")))


def test_wrong_submissions_accepts_expect_line_without_spaces(package: Path) -> None:
    wrong = package / "wrong"
    shutil.rmtree(wrong)
    wrong.mkdir()
    (wrong / "a.py").write_text("#expect:WRONG_ANSWER\ndef f(): pass\n", encoding="utf-8")
    (wrong / "b.py").write_text("# expect: RUNTIME_ERROR   \n", encoding="utf-8")
    (wrong / "notes.txt").write_text("not a submission\n", encoding="utf-8")
    found = [(p.name, v) for p, v in load_problem(package).wrong_submissions()]
    assert found == [("a.py", "WRONG_ANSWER"), ("b.py", "RUNTIME_ERROR")]


@pytest.mark.parametrize(
    "text",
    [
        "import jax\n",  # no expect line at all
        "",  # empty file
        "# a comment first\n# expect: WRONG_ANSWER\n",  # expect line not first
        "# expect: NEARLY_RIGHT\n",  # not a verdict
        "# expect: wrong_answer\n",  # verdicts are upper case
    ],
    ids=["missing", "empty", "not-first-line", "unknown-verdict", "lower-case"],
)
def test_wrong_submission_without_valid_expect_line_is_rejected(package: Path, text: str) -> None:
    bad = package / "wrong" / "zz_bad.py"
    bad.write_text(text, encoding="utf-8")
    problem = load_problem(package)
    with pytest.raises(ProblemError) as info:
        problem.wrong_submissions()
    assert f"{package.name}/wrong/zz_bad.py" in str(info.value) and str(package.parent) not in str(info.value)
    assert "# expect: VERDICT" in str(info.value)


def test_every_bad_expect_line_is_reported_at_once_with_did_you_mean(package: Path) -> None:
    (package / "wrong" / "a_bad.py").write_text("# expect: WRONG_POLCY\n", encoding="utf-8")
    (package / "wrong" / "b_bad.py").write_text("# expect: wrong_answer\n", encoding="utf-8")
    (package / "wrong" / "c_bad.py").write_text("import jax\n", encoding="utf-8")
    with pytest.raises(ProblemError) as info:
        load_problem(package).wrong_submissions()
    lines = str(info.value).splitlines()
    assert len(lines) == 3 and "(did you mean WRONG_POLICY?)" in lines[0] and "(did you mean WRONG_ANSWER?)" in lines[1]
    assert "c_bad.py" in lines[2]


# --- every static error at once ----------------------------------------------------------------------


def test_every_shipped_package_passes_the_static_check() -> None:
    for root in sorted(DOT_POLICY_DIR.parent.iterdir()):
        if (root / "problem.toml").is_file():
            assert check_package(root).version == load_problem(root).version


def test_the_static_check_reports_toml_expect_line_missing_and_misplaced_files_together(package: Path) -> None:
    """Two misspelt keys, a bad `# expect:` line, a missing file and misplaced ones: one report
    (load_problem stops at the toml; the author would learn of the rest upload after upload)."""
    edit_toml(package, r"^title = ", 'titel = "x"\ntitle = ')
    edit_toml(package, r"^\[memory\]", "[memory]\nrulle = 1")
    (package / "wrong" / "a_bad.py").write_text("# expect: WRONG_POLCY\nimport jax\n", encoding="utf-8")
    (package / "right" / "b_bad.py").write_text("# expect: WRONG_ANSWER\nimport jax\n", encoding="utf-8")
    (package / "starter.py").rename(package / "statr.py")  # missing starter.py, and a file never served
    (package / "solution.py").write_text("x = 1\n", encoding="utf-8")
    (package / "tests").mkdir()
    (package / "wrong" / "more").mkdir()
    (package / "wrong" / "notes.txt").write_text("a note is fine\n", encoding="utf-8")
    (package / "README.md").write_text("so is a readme\n", encoding="utf-8")
    with pytest.raises(ProblemError) as info:
        check_package(package)
    lines = str(info.value).splitlines()
    slug = package.name
    expected = [
        f"{slug}: missing starter.py",
        f"{slug}/problem.toml: titel: unknown key (did you mean 'title'?)",
        f"{slug}/problem.toml: memory.rulle: unknown key (did you mean 'rule'?)",
        f"{slug}/right/b_bad.py: a right/ submission must expect ACCEPTED, not WRONG_ANSWER",
        f"{slug}/wrong/a_bad.py: the first line must be `# expect: VERDICT`",
        f"{slug}/wrong/more/: not graded",
        f"{slug}/solution.py: never graded nor served",
        f"{slug}/statr.py: not a package file (did you mean starter.py?)",
        f"{slug}/tests/: not part of a package",
    ]
    for start in expected:
        assert sum(line.startswith(start) for line in lines) == 1, (start, lines)
    assert len(lines) == len(expected), lines
    assert "(did you mean WRONG_POLICY?)" in str(info.value) and str(package.parent) not in str(info.value)
    with pytest.raises(ProblemError) as first_only:
        load_problem(package)  # serving stops at the first file it needs
    assert "wrong/" not in str(first_only.value)
