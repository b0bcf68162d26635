"""Grading with children started ahead (`sandbox/ready.py`, `JudgeConfig.ready_children`): the same
verdicts as without them, the waiting children really serve the next submission, and a verifier
child waiting with one problem version's expectations never judges another version."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from graders.config import JudgeConfig
from graders.pipeline import grade
from graders.problems.problem import Problem, load_problem
from graders.verdict import Verdict
from graders.verifier.client import verifier_ready
from sandbox.jail import jail_ready
from tests.support import PROBLEMS, jail_processes

pytestmark = pytest.mark.jail


def test_ready_children_serve_the_next_submission_with_the_same_verdicts(
    judge_config: JudgeConfig, dot_problem: Problem
) -> None:
    config = replace(judge_config, ready_children=1)
    jails, verifiers = jail_ready(), verifier_ready()
    jails.drain(), verifiers.drain()
    other = load_problem(PROBLEMS / "remat_sin_sin")
    right = dot_problem.reference_path.read_text()
    wrong = (dot_problem.root / "wrong" / "everything_saveable.py").read_text()
    try:
        assert grade(right, dot_problem, config).verdict == Verdict.ACCEPTED
        assert jails.settle(60) and verifiers.settle(60)
        assert jails.waiting() == 1 and verifiers.waiting() == 1
        jail_hits, verifier_hits, verifier_misses = jails.hits, verifiers.hits, verifiers.misses
        with_ready = grade(wrong, dot_problem, config)
        assert (jails.hits, verifiers.hits) == (jail_hits + 1, verifier_hits + 1)
        assert jails.settle(60) and verifiers.settle(60)  # the replacements have landed
        without = grade(wrong, dot_problem, judge_config)  # ready_children=0: keeps none waiting
        assert with_ready.verdict == without.verdict == Verdict.WRONG_POLICY
        judged = lambda report: [(c.name, c.passed, c.message) for c in report.checks if c.name != "sandbox"]  # noqa: E731
        assert judged(with_ready) == judged(without) != []
        assert verifiers.waiting() == 0, "ready_children=0 keeps nothing waiting"
        # another problem: the verifier child waiting with dot_problem's expectations is not used
        assert grade(right, dot_problem, config).verdict == Verdict.ACCEPTED
        assert verifiers.settle(60) and verifiers.waiting() == 1
        report = grade(other.reference_path.read_text(), other, config)
        assert report.verdict == Verdict.ACCEPTED, report.model_dump_json(indent=1)
        assert verifiers.misses == verifier_misses + 2
    finally:
        jails.drain(), verifiers.drain()
    assert jail_processes() == []


def test_the_grader_starts_no_child_ahead_while_submissions_are_queued(
    judge_config: JudgeConfig, dot_problem: Problem, tmp_path: Path
) -> None:
    """A burst gains nothing from children started ahead (the next job is already queued) and a
    replacement might be for another problem: the grader asks for none while the queue is not empty."""
    from graders.problems.problem import ProblemRepository
    from server.grading.grader import Grader
    from server.store import migrate
    from server.store.db import make_engine
    from server.store.submissions import SubmissionStore

    url = f"sqlite:///{tmp_path / 'judge.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    store = SubmissionStore(engine)
    grader = Grader(
        store=store,
        problems=ProblemRepository(PROBLEMS),
        config_factory=lambda: replace(judge_config, ready_children=1),
        worker_id="w",
        lease_s=30,
        max_attempts=3,
    )
    jails, verifiers = jail_ready(), verifier_ready()
    jails.drain(), verifiers.drain()
    source = dot_problem.reference_path.read_text()
    first, second = (store.create(problem=dot_problem.slug, source="\n" * i + source) for i in range(2))
    try:
        assert grader.grade(first.id) == "graded"  # `second` is still queued: a backlog
        assert jails.settle(60) and verifiers.settle(60)
        assert jails.waiting() == verifiers.waiting() == 0, "a child was started ahead during a backlog"
        assert grader.grade(second.id) == "graded"  # nothing queued now
        assert jails.settle(60) and verifiers.settle(60)
        assert jails.waiting() == verifiers.waiting() == 1
        assert [store.get(r.id).verdict for r in (first, second)] == ["ACCEPTED", "ACCEPTED"]
    finally:
        jails.drain(), verifiers.drain()
        engine.dispose()
