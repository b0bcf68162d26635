"""Fixtures shared by the integration and end-to-end tests (real jail, real processes)."""

from __future__ import annotations

import os

import pytest

from graders.pipeline import JudgeConfig
from graders.problem import Problem, load_problem
from tests.services import *  # noqa: F403  (postgres_server, postgres_url, redis_server, redis_url, redis_factory)
from tests.support import PROBLEMS, jail_available


@pytest.fixture(scope="session")
def judge_config(tmp_path_factory: pytest.TempPathFactory) -> JudgeConfig:
    """A judge configuration with its own reference cache and a test seed. Skips without
    bubblewrap, except in CI (CI=1), where a missing jail is a failure."""
    reason = jail_available()
    if reason and os.environ.get("CI"):
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)
    return JudgeConfig(cache_dir=tmp_path_factory.mktemp("cache"), seed=b"integration-test-seed")


@pytest.fixture(scope="session")
def dot_problem() -> Problem:
    """The real `problems/checkpoint_dot_policy` package (every layer's tests share this one)."""
    return load_problem(PROBLEMS / "checkpoint_dot_policy")
