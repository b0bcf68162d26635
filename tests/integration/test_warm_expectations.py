"""No cold first verdict: a served version's expectations are built once, before its first
submission needs them, through the real parts (a `remat-judge serve` process, its verifier
children, the CLI). Builds are counted in the cache's own record (`builds.jsonl`,
`graders.reference.cache_builds`), which every builder appends to, whichever process it is."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from graders.config import JudgeConfig
from graders.problems.problem import load_problem
from graders.problems.publication import content_version, publish
from graders.reference.cache_builds import recorded_builds
from graders.reference.expectation import cache_dir
from graders.reference.expectation_files import is_current
from tests.support import PROBLEMS, Server, remat_judge

pytestmark = pytest.mark.jail
SLUG = "remat_sin_sin"  # a small problem: its validation grades 13 files
SEED = "warm-test-seed"
FINISHED = "expectations warm-up finished"


def a_copy(tmp_path: Path, *, published: bool) -> Path:
    """A problems folder holding a copy of `SLUG`, published as its folder is now, or not."""
    root = tmp_path / "problems"
    shutil.copytree(PROBLEMS / SLUG, root / SLUG, ignore=shutil.ignore_patterns(".published"))
    if published:
        publish(root / SLUG, root, content_version(root / SLUG))
    return root


def entry_of(data_dir: Path, problems: Path) -> Path:
    """Where the server started on `data_dir` caches the expectations of `SLUG` (its key)."""
    return cache_dir((data_dir / "cache").resolve(), load_problem(problems / SLUG), SEED.encode())


def server_on(data_dir: Path, problems: Path) -> Server:
    return Server(
        data_dir,
        env={
            "REMAT_JUDGE_PROBLEMS_DIR": str(problems),
            "REMAT_JUDGE_HIDDEN_SEED": SEED,
            "REMAT_JUDGE_WARM_EXPECTATIONS": "true",
            "REMAT_JUDGE_RATE_LIMIT": "",
            "REMAT_JUDGE_CACHE_DIR": None,  # `<data dir>/cache`: these tests count its builds
        },
    ).start()


def warm_up_line(server: Server, deadline_s: float = 600.0) -> str:
    """The server's log line saying its warm-up went through every version (polled until `deadline_s`)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for line in server.log.read_text(errors="replace").splitlines():
            if FINISHED in line:
                return line
        time.sleep(0.2)
    raise AssertionError(f"no {FINISHED!r} in the server's log: " + server.log.read_text()[-3000:])


def accepted(server: Server, source: str) -> None:
    with server.client() as client:
        r = client.post("/api/v1/submissions", params={"wait": "true"}, json={"problem": SLUG, "source": source})
    assert r.status_code == 200, r.text
    assert r.json()["verdict"] == "ACCEPTED", r.text


def builds(data_dir: Path) -> list[tuple[str, str, str]]:
    return [(b["slug"], b["entry"], b["outcome"]) for b in recorded_builds((data_dir / "cache").resolve())]


def test_a_fresh_server_builds_the_expectations_once_in_the_background(
    judge_config: JudgeConfig, tmp_path: Path
) -> None:
    """Readiness does not wait for the warm-up; a submission right after it (the build in
    progress, or not yet begun, or done: whichever came first) and one after the warm-up are
    judged on the one build."""
    problems, data_dir = a_copy(tmp_path, published=True), tmp_path / "data"
    entry = entry_of(data_dir, problems)
    server = server_on(data_dir, problems)
    try:
        source = (problems / SLUG / "reference.py").read_text()
        accepted(server, source)  # right after readiness
        assert "1 built" in warm_up_line(server) or "1 already cached" in warm_up_line(server)
        accepted(server, "\n" + source)  # other line numbers: not answered by the result cache
    finally:
        server.stop()
    assert is_current(entry)
    assert builds(data_dir) == [(SLUG, entry.name, "built")]


def test_publish_leaves_the_expectations_cached_for_the_server(judge_config: JudgeConfig, tmp_path: Path) -> None:
    """`problems publish` validates by building the expectations into the cache and under the key
    the server reads: the server started next builds nothing, for its warm-up or for a submission."""
    problems, data_dir = a_copy(tmp_path, published=False), tmp_path / "data"
    env = {**os.environ, "REMAT_JUDGE_HIDDEN_SEED": SEED, "REMAT_JUDGE_PROBLEMS_DIR": str(problems)}
    done = remat_judge("problems", "publish", SLUG, "--data-dir", str(data_dir), env=env, timeout_s=900)
    assert done.returncode == 0, done.stdout + done.stderr
    entry = entry_of(data_dir, problems)
    assert is_current(entry)
    assert builds(data_dir) == [(SLUG, entry.name, "built")]
    server = server_on(data_dir, problems)
    try:
        assert "0 built, 1 already cached, 0 not built" in warm_up_line(server)
        accepted(server, (problems / SLUG / "reference.py").read_text())
    finally:
        server.stop()
    assert builds(data_dir) == [(SLUG, entry.name, "built")]
