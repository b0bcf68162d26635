"""Building a version's expectations once: one builder per cache entry at a time (the others wait
and read its result: `graders.reference.cache_builds`), and the warm-up a grading process starts
(`server.grading.warm_expectations`), with a stand-in builder (the real one, in a verifier
child, is tests/integration/test_warm_expectations.py)."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from graders.config import JudgeConfig
from graders.problems.problem import Problem, ProblemRepository
from graders.problems.publication import content_version, publish
from graders.reference.cache_builds import cached_or_built, lock_path, needs_build, recorded_builds
from graders.reference.expectation import Expectations, cache_dir
from graders.reference.expectation_files import save_expectations
from graders.reference.failures import ReferenceCheckError
from server.grading.warm_expectations import ExpectationWarmup
from server.runtime import start_warmup
from server.settings import Settings
from tests.support import PROBLEMS
from tests.unit.test_api_admission import make_client

SEED = b"unit-warmup-seed"


def empty_expectations(slug: str = "p", version: str = "v1") -> Expectations:
    """Expectations with no case, of this install's JAX (what the cache accepts)."""
    return Expectations(
        slug=slug, version=version, jax_version=importlib.metadata.version("jax"), leaf_names=[], cases=[]
    )


def blocked_on(lock: Path, deadline_s: float = 30.0) -> bool:
    """Whether some process or thread waits for the flock of `lock` (a `->` line of /proc/locks on
    its inode), polled until `deadline_s`."""
    inode = str(os.stat(lock).st_ino)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "->" in fields and fields[-3].rsplit(":", 1)[-1] == inode:
                return True
        time.sleep(0.01)
    return False


def test_a_second_builder_of_the_same_entry_waits_and_reads_the_first_ones_result(tmp_path: Path) -> None:
    entry = tmp_path / "cache" / "p" / "v1-seed"
    entered, release = threading.Event(), threading.Event()
    calls: list[str] = []
    results: dict[str, Expectations] = {}

    def first_build() -> Expectations:
        calls.append("first")
        entered.set()
        assert release.wait(30)
        return empty_expectations()

    def second_build() -> Expectations:
        calls.append("second")
        return empty_expectations()

    first = threading.Thread(target=lambda: results.update(first=cached_or_built(entry, first_build)))
    first.start()
    assert entered.wait(30)
    second = threading.Thread(target=lambda: results.update(second=cached_or_built(entry, second_build)))
    second.start()
    assert blocked_on(lock_path(entry)), "the second builder does not wait for the entry's lock"
    release.set()
    first.join(30), second.join(30)
    assert calls == ["first"]
    assert results["second"].slug == results["first"].slug == "p"
    assert [(b["slug"], b["entry"], b["outcome"]) for b in recorded_builds(tmp_path / "cache")] == [
        ("p", "v1-seed", "built")
    ]
    assert not needs_build(entry)


def test_a_failed_self_check_is_recorded_once_and_not_built_again(tmp_path: Path) -> None:
    entry = tmp_path / "cache" / "p" / "v1-seed"
    calls = []

    def failing() -> Expectations:
        calls.append(1)
        raise ReferenceCheckError("finite_difference", "the gradient is off")

    for _ in range(2):
        with pytest.raises(ReferenceCheckError, match="the gradient is off"):
            cached_or_built(entry, failing)
    assert calls == [1]
    assert [b["outcome"] for b in recorded_builds(tmp_path / "cache")] == ["failed: finite_difference"]
    assert not needs_build(entry)  # the warm-up leaves it too


def published_copies(tmp_path: Path, slugs: list[str]) -> ProblemRepository:
    """A problems folder with a published copy of each of `slugs` (published as its folder is now)."""
    root = tmp_path / "problems"
    for slug in slugs:
        shutil.copytree(PROBLEMS / slug, root / slug, ignore=shutil.ignore_patterns(".published"))
        publish(root / slug, root, content_version(root / slug))
    return ProblemRepository(root)


def test_the_warm_up_builds_each_missing_version_one_at_a_time(tmp_path: Path) -> None:
    problems = published_copies(tmp_path, ["checkpoint_dot_policy", "remat_sin_sin", "mlp_dots_policy"])
    config = JudgeConfig(cache_dir=tmp_path / "cache", seed=SEED)
    cached = problems.get("remat_sin_sin")
    save_expectations(empty_expectations(cached.slug, cached.version), cache_dir(config.cache_dir, cached, SEED))
    active, most, built = [0], [0], []
    lock = threading.Lock()

    def build(problem: Problem) -> str | None:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        built.append(problem.slug)
        with lock:
            active[0] -= 1
        return None

    warmup = ExpectationWarmup(problems, config, build=build)
    warmup.start()
    assert warmup.wait(30)
    assert built == ["checkpoint_dot_policy", "mlp_dots_policy"]
    assert [label.split("@")[0] for label in warmup.built] == built
    assert warmup.cached == [f"remat_sin_sin@{cached.version}"]
    assert most[0] == 1 and warmup.failed == []


def test_a_failure_is_said_at_warning_and_the_warm_up_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    problems = published_copies(tmp_path, ["checkpoint_dot_policy", "remat_sin_sin"])
    config = JudgeConfig(cache_dir=tmp_path / "cache", seed=SEED)

    def build(problem: Problem) -> str | None:
        if problem.slug == "checkpoint_dot_policy":
            raise RuntimeError("the verifier could not start")
        return "reference.py: finite_difference: the gradient is off"

    warmup = ExpectationWarmup(problems, config, build=build)
    with caplog.at_level(logging.INFO, logger="server.grading.warm_expectations"):
        warmup.start()
        assert warmup.wait(30)
    assert [label.split("@")[0] for label in warmup.failed] == ["checkpoint_dot_policy", "remat_sin_sin"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "the verifier could not start" in warnings[0] and "built on demand" in warnings[0]
    assert "finite_difference" in warnings[1]
    assert any("0 built, 0 already cached, 2 not built" in r.getMessage() for r in caplog.records)


def test_the_setting_turns_the_warm_up_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMAT_JUDGE_WARM_EXPECTATIONS", "false")
    settings = Settings(data_dir=tmp_path / "data", problems_dir=tmp_path / "problems", hidden_seed="s")
    assert settings.warm_expectations is False
    assert start_warmup(settings, ProblemRepository(settings.problems_dir)) is None
    monkeypatch.delenv("REMAT_JUDGE_WARM_EXPECTATIONS")
    assert Settings(data_dir=tmp_path / "data", hidden_seed="s").warm_expectations is True


def test_readiness_waits_for_the_warm_up(tmp_path: Path) -> None:
    """/readyz answers 503 "warming" while the warm-up builds (a load balancer sends the first
    student elsewhere) and 200 once every served version is ready."""
    problems = published_copies(tmp_path, ["remat_sin_sin"])
    config = JudgeConfig(cache_dir=tmp_path / "cache", seed=SEED)
    release = threading.Event()
    warmup = ExpectationWarmup(problems, config, build=lambda problem: None if release.wait(30) else "stuck")
    client, _ = make_client(tmp_path / "site")
    client.app.state.warmup = warmup  # type: ignore[attr-defined]
    warmup.start()
    try:
        answer = client.get("/readyz")
        assert answer.status_code == 503
        assert answer.json()["checks"]["expectations"].startswith("warming")
    finally:
        release.set()
    assert warmup.wait(30)
    answer = client.get("/readyz")
    assert answer.status_code == 200 and answer.json()["checks"]["expectations"] == "ok"


def test_the_templates_are_up_before_the_first_version_is_built(tmp_path: Path) -> None:
    """Readiness means the jail and verifier templates are running too: the warm-up starts them
    (and waits) before it builds anything; a failure to start them is said and the builds go on."""
    problems = published_copies(tmp_path, ["remat_sin_sin"])
    config = JudgeConfig(cache_dir=tmp_path / "cache", seed=SEED)
    happened: list[str] = []

    def templates() -> None:
        happened.append("templates")
        raise RuntimeError("bwrap is missing")

    warmup = ExpectationWarmup(problems, config, build=lambda p: happened.append(p.slug) or None, templates=templates)
    warmup.start()
    assert warmup.wait(30)
    assert happened == ["templates", "remat_sin_sin"] and warmup.done.is_set()
