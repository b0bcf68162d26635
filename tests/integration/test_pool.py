"""The warm pool: pre-started jails and verifiers are used once each and never outlive the pool."""

from __future__ import annotations

import pytest

from graders.pipeline import JudgeConfig, grade
from graders.pool import WarmPool
from graders.problem import Problem
from graders.verdict import Verdict
from tests.support import PROBLEMS, jail_processes

pytestmark = pytest.mark.jail


def test_warm_processes_serve_one_submission_each(judge_config: JudgeConfig, dot_problem: Problem) -> None:
    pool = WarmPool(judge_config, size=1)
    try:
        first = grade(dot_problem.reference_path.read_text(), dot_problem, judge_config, pool=pool)
        assert first.verdict == Verdict.ACCEPTED
        limits = judge_config.jail_limits_for(dot_problem)
        warm_jail = pool.jail(limits)           # refilled after the first grading
        warm_verifier = pool.verifier()
        assert warm_jail.alive() and warm_verifier.alive()
        assert pool.jail(limits) is not warm_jail  # taken means gone from the pool: never reused
        warm_jail.close()
        warm_verifier.close()

        pool.refill(limits)
        wrong = (PROBLEMS / "checkpoint_dot_policy" / "wrong" / "no_checkpoint.py").read_text()
        second = grade(wrong, dot_problem, judge_config, pool=pool)
        assert second.verdict == Verdict.WRONG_POLICY
    finally:
        pool.close()
    assert jail_processes() == []


def test_a_closed_pool_starts_nothing_and_keeps_nothing(judge_config: JudgeConfig, dot_problem: Problem) -> None:
    pool = WarmPool(judge_config, size=2)
    limits = judge_config.jail_limits_for(dot_problem)
    pool.refill(limits)
    kept = [pool.jail(limits), pool.jail(limits)]
    assert all(j.alive() for j in kept)
    for j in kept:
        j.close()
    pool.close()
    pool.refill(limits)
    fresh = pool.jail(limits)  # a closed pool still hands out (new) jails, it just keeps none
    assert fresh.alive()
    fresh.close()
    assert jail_processes() == []
