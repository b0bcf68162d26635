"""Fixtures shared by the integration and end-to-end tests (real jail, real processes)."""

from __future__ import annotations

import os

import pytest

from graders.pipeline import JudgeConfig
from graders.problems.problem import Problem, ProblemRepository, load_problem
from tests.services import *  # noqa: F403  (postgres_server, postgres_url, redis_server, redis_url, redis_factory)
from tests.support import PROBLEMS, jail_available

SPREAD = "spread"
"""A module that sets `pytestmark = pytest.mark.spread` has its tests shared out among the
pytest-xdist workers one by one (the bank's verdicts, the attacks: many independent gradings), and so has the
fast layer (tests/unit: no servers); every other module's tests run on one worker, so its
module-scoped servers start once."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{SPREAD}: the module's tests may run on different xdist workers")
    # The CLI's tables (Rich) are as wide as the terminal, or COLUMNS; an xdist worker has no
    # terminal, so without this they shrink to 80 columns and cut the text tests look for.
    os.environ.setdefault("COLUMNS", "200")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        # A fresh clone has no snapshots of its published problems (git keeps none) and a server
        # makes them when it starts. Made here, before any worker runs, they never appear in the
        # middle of a test that watches the problems folder for writes (tests/security).
        ProblemRepository(PROBLEMS).make_missing_snapshots()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test of a module that does not spread joins its module's xdist group (`--dist=loadgroup`)."""
    for item in items:
        spread = item.get_closest_marker(SPREAD) is not None or item.nodeid.startswith("tests/unit/")
        if not spread and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


@pytest.fixture(scope="session")
def judge_config(tmp_path_factory: pytest.TempPathFactory) -> JudgeConfig:
    """A judge configuration with a test seed and a reference cache shared by this run's xdist
    workers (entries are written by rename, and a race is settled by keeping either: they are the
    same). Skips without bubblewrap, except in CI (CI=1), where a missing jail is a failure."""
    reason = jail_available()
    if reason and os.environ.get("CI"):
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' base temp folders share a parent
        cache = tmp_path_factory.getbasetemp().parent / "expectation-cache"
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("cache")
    return JudgeConfig(cache_dir=cache, seed=b"integration-test-seed")


@pytest.fixture(scope="session")
def dot_problem() -> Problem:
    """The real `problems/checkpoint_dot_policy` package (every layer's tests share this one)."""
    return load_problem(PROBLEMS / "checkpoint_dot_policy")
