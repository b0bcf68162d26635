"""Every known-wrong submission of every problem, and its reference, through the real jail and verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.checks.residuals import is_bookkeeping
from graders.pipeline import JudgeConfig, grade
from graders.problems.problem import ProblemRepository
from graders.problems.validate import score_note
from graders.verdict import Verdict
from tests.support import PROBLEMS, jail_processes

pytestmark = pytest.mark.spread  # independent gradings: shared out among the xdist workers

REPO = ProblemRepository(PROBLEMS)
# Collected from the folders without loading the packages: a broken package fails its own tests.
WRONG = [(slug, path) for slug in REPO.slugs() for path in sorted((PROBLEMS / slug / "wrong").glob("*.py"))]


@pytest.mark.jail
@pytest.mark.parametrize("slug", REPO.slugs())
def test_reference_is_accepted(slug: str, judge_config: JudgeConfig) -> None:
    problem = REPO.working(slug)
    report = grade(problem.reference_path.read_text(), problem, judge_config)
    assert report.verdict == Verdict.ACCEPTED, [c.message for c in report.checks if not c.passed]
    assert report.score == pytest.approx(1.0)
    assert report.residuals is not None
    assert report.residuals.submitted_bytes == report.residuals.expected_bytes
    assert jail_processes() == []


@pytest.mark.jail
@pytest.mark.parametrize("slug,path", WRONG, ids=[f"{s}/{p.name}" for s, p in WRONG])
def test_wrong_submission_gets_its_verdict(slug: str, path: Path, judge_config: JudgeConfig) -> None:
    problem = REPO.working(slug)
    expected = dict((p.name, v) for p, v in problem.wrong_submissions())[path.name]
    report = grade(path.read_text(), problem, judge_config)
    failed = [f"{c.name}: {c.message}" for c in report.checks if not c.passed]
    assert report.verdict == Verdict(expected), failed
    assert report.verdict != Verdict.ACCEPTED
    # the failing check that decided the verdict says something a student can act on
    assert failed and all(len(m) > 20 for m in failed)
    assert jail_processes() == []


RIGHT = [(slug, path) for slug in REPO.slugs() for path in sorted((PROBLEMS / slug / "right").glob("*.py"))]


@pytest.mark.jail
@pytest.mark.parametrize("slug,path", RIGHT, ids=[f"{s}/{p.name}" for s, p in RIGHT])
def test_correct_variant_in_another_style_is_accepted(slug: str, path: Path, judge_config: JudgeConfig) -> None:
    """right/ holds correct solutions written differently from the reference (decorators, einsum,
    transposed layouts, names on exactly the saved values): other summation orders must pass the
    calibrated tolerance, and equal saved values must match whatever their order."""
    problem = REPO.working(slug)
    report = grade(path.read_text(), problem, judge_config)
    assert report.verdict == Verdict.ACCEPTED, [f"{c.name}: {c.message}" for c in report.checks if not c.passed]
    assert report.residuals is not None
    if problem.spec.memory.rule == "exact" and problem.spec.memory.match == "values":
        # every value of the policy is matched; a loop counter (bookkeeping) is not compared
        assert all(f.matched for f in report.residuals.submitted if not is_bookkeeping(f))
    # a budget problem's right/ file says the score it must get (`# score: 1.0`, `# score: below 1`)
    assert score_note(path.read_text(), report.score) == ""
    assert jail_processes() == []


# Three wrong policies once judged ACCEPTED: each saves exactly the reference's residual avals.
SAME_AVAL_WRONG_POLICIES = {
    "names_post_activation.py": "maximum",  # saves relu(x @ w1) where the policy saves x @ w1
    "exact_zero_extra_residuals.py": None,  # plain checkpoint plus an exact zero
    "custom_vjp_saves_gradients.py": None,  # no checkpoint; gradients stored as residuals
}


@pytest.mark.jail
@pytest.mark.parametrize("name", sorted(SAME_AVAL_WRONG_POLICIES))
def test_same_aval_wrong_policy_is_told_apart_by_values(name: str, judge_config: JudgeConfig) -> None:
    problem = REPO.working("checkpoint_dot_policy")
    report = grade((PROBLEMS / problem.slug / "wrong" / name).read_text(), problem, judge_config)
    assert report.verdict == Verdict.WRONG_POLICY
    residuals = report.residuals
    assert residuals is not None
    assert sorted((tuple(f.shape), f.dtype) for f in residuals.submitted) == sorted(
        (tuple(f.shape), f.dtype) for f in residuals.expected
    )  # the avals alone would pass
    assert any(f.matched is False for f in residuals.submitted)
    message = next(c.message for c in report.checks if c.name == "residuals")
    assert "not one the required policy saves" in message
    source = SAME_AVAL_WRONG_POLICIES[name]
    if source is not None:
        assert f"from `{source}`" in message and "from `dot_general`" in message
        # it recomputes x @ w1 (2·N·d·d FLOPs on the large case) in the backward pass
        extra = residuals.submitted_recompute_flops - residuals.expected_recompute_flops
        assert extra >= 0.99 * 2 * 1024 * 256 * 256  # minus the elementwise relu the reference redoes
        assert "more FLOPs of forward work than the required policy's" in message


@pytest.mark.jail
def test_an_author_who_accepts_either_memory_kind_gets_both(tmp_path: Path, judge_config: JudgeConfig) -> None:
    """offload_named_activation with `compare_kinds = false`: keeping `a` on the device (or, the same
    program, offloading it to unpinned_host) is ACCEPTED; other values are still WRONG_POLICY."""
    import shutil

    from graders.problems.problem import load_problem

    root = tmp_path / "offload_either_place"
    shutil.copytree(PROBLEMS / "offload_named_activation", root, ignore=shutil.ignore_patterns(".published"))
    toml = (root / "problem.toml").read_text()
    (root / "problem.toml").write_text(
        toml.replace('slug = "offload_named_activation"', 'slug = "offload_either_place"').replace(
            '[memory]\nrule = "exact"', '[memory]\nrule = "exact"\ncompare_kinds = false'
        )
    )
    relaxed, strict = load_problem(root), REPO.working("offload_named_activation")
    assert relaxed.spec.memory.compare_kinds is False
    wrong = PROBLEMS / "offload_named_activation" / "wrong"
    for name in ("keeps_a_on_device.py", "offloads_to_unpinned_host.py"):
        source = (wrong / name).read_text()
        assert grade(source, relaxed, judge_config).verdict == Verdict.ACCEPTED, name
        report = grade(source, strict, judge_config)
        residuals = next(c for c in report.checks if c.name == "residuals")
        assert report.verdict == Verdict.WRONG_POLICY and "keeps them in other memory" in residuals.message
        assert "in device memory x1" in residuals.message and "unpinned_host" in residuals.message
    other = grade((wrong / "offloads_pre_activation.py").read_text(), relaxed, judge_config)
    assert other.verdict == Verdict.WRONG_POLICY
    assert jail_processes() == []


STYLES = Path(__file__).resolve().parents[2] / "bench" / "styles"
HELD_OUT = sorted((d.name, path) for d in STYLES.iterdir() if d.is_dir() for path in sorted(d.glob("*.py")))


@pytest.mark.jail
@pytest.mark.parametrize("slug,path", HELD_OUT, ids=[f"{s}/{p.name}" for s, p in HELD_OUT])
def test_held_out_style_gets_its_verdict(slug: str, path: Path, judge_config: JudgeConfig) -> None:
    """bench/styles: formulations the bank's files do not use (a four-block mat-vec, a weight kept
    [out, in], heads-first attention, a loop indexing stacked weights, a hand-written VJP that
    recomputes), each with the verdict its `# expect:` line names: what the recompute figure and
    the layout rule were built for (`bench/recompute_styles.py --styles bench/styles` prints them)."""
    problem = REPO.working(slug)
    expected = path.read_text().splitlines()[0].removeprefix("# expect:").strip()
    report = grade(path.read_text(), problem, judge_config)
    assert report.verdict == Verdict(expected), [f"{c.name}: {c.message}" for c in report.checks if not c.passed]
    assert score_note(path.read_text(), report.score) == ""  # a budget style's `# score:` line
    assert jail_processes() == []
