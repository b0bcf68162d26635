"""Fixtures shared by the integration and end-to-end tests (real jail, real processes)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest

from graders.pipeline import JudgeConfig
from graders.problems.problem import Problem, ProblemRepository, load_problem
from tests.services import *  # noqa: F403  (postgres_server, postgres_url, redis_server, redis_url, redis_factory)
from tests.support import PROBLEMS, SHARED_CACHE_VARIABLE, TEST_SEED, jail_available

SPREAD = "spread"
"""A module that sets `pytestmark = pytest.mark.spread` has its tests shared out among the
pytest-xdist workers one by one (the bank's verdicts, the attacks: many independent gradings), and so has the
fast layer (tests/unit: no servers); every other module's tests run on one worker, so its
module-scoped servers start once (`ModuleScheduling`)."""


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


@functools.cache
def spreads(root: Path, module: str) -> bool:
    """Whether the test module at `module` (a path relative to the rootdir) spreads its tests."""
    if module.startswith("tests/unit/"):
        return True
    try:
        return f"pytest.mark.{SPREAD}" in (root / module).read_text(encoding="utf-8")
    except OSError:
        return False


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling with a module's tests as one unit unless the module spreads them.

    Not `--dist=loadgroup` with `xdist_group` marks: pytest-xdist 3.8 puts the group into
    `item._nodeid`, which pytest 9 no longer reads (a node id is built from `item._id`), so no
    module was grouped and every module-scoped server and database started on both workers
    (measured: each LTI module's server set up twice, test_migrations' 23 tests on both workers)."""
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if spreads(root, module) else module

    return ModuleScheduling(config, log)


@pytest.fixture(scope="session", autouse=True)
def shared_expectation_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One reference-expectation cache for this run: the library gradings' (`judge_config`) and
    every test server's and worker's (`tests.support.Server`, `Worker`: `REMAT_JUDGE_CACHE_DIR`),
    shared by the xdist workers (their base temp folders share a parent). Entries are keyed by
    version and seed and written by rename, a build is locked per version, so a version is built
    once per seed instead of once per server (measured: 3 to 4 s of CPU each). A test about
    building sets its own cache."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "expectation-cache"
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("cache")
    os.environ[SHARED_CACHE_VARIABLE] = str(cache)
    return cache


@pytest.fixture(scope="session")
def judge_config(shared_expectation_cache: Path) -> JudgeConfig:
    """A judge configuration with the suite's seed (`tests.support.TEST_SEED`, the test servers'
    too) and the run's shared reference cache. Skips without bubblewrap, except in CI (CI=1),
    where a missing jail is a failure."""
    reason = jail_available()
    if reason and os.environ.get("CI"):
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)
    return JudgeConfig(cache_dir=shared_expectation_cache, seed=TEST_SEED.encode())


@pytest.fixture(scope="session")
def dot_problem() -> Problem:
    """The real `problems/checkpoint_dot_policy` package (every layer's tests share this one)."""
    return load_problem(PROBLEMS / "checkpoint_dot_policy")
