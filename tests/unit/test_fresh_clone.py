"""Published means published, from a fresh clone: git keeps no `problems/.versions/`, so a clone's
published problems have no snapshot. Loading the repository (server start, `problems list`) makes
each snapshot from the committed folder, which is the published version; a folder edited before
that is refused everywhere (students, API, grading), said at ERROR with the command to run, and
`problems list` says the same as the server, never "students still get the published version"."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from graders.problems.problem import ProblemRepository, ProblemUnavailable
from graders.problems.publication import VERSIONS, published_version, snapshot_dir
from tests.support import REPO

CLI = str(Path(sys.executable).parent / "remat-judge")
SLUG = "remat_sin_sin"
EDIT = "\n\nAN UNPUBLISHED DRAFT PARAGRAPH\n"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The problems folder of a `git clone` of this repository (its committed files only)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and this repository's history")
    target = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(target)], check=True, timeout=120)
    problems = target / "problems"
    assert not (problems / VERSIONS).exists()  # what the issue is about: git ignores the snapshots
    return problems


def problems_list(problems: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMAT_JUDGE_")}
    return subprocess.run(
        [CLI, "problems", "list", "--problems-dir", str(problems)],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "400"},
        timeout=120,
    )


def test_an_unedited_clone_serves_the_published_versions_and_makes_their_snapshots(clone: Path) -> None:
    repo = ProblemRepository(clone)  # what the server does at start
    for slug in repo.slugs():
        version = published_version(clone / slug)
        assert version is not None and snapshot_dir(clone, slug, version).is_dir(), slug
        served = repo.get(slug)
        assert served.version == version and served.root == snapshot_dir(clone, slug, version)
    assert len(repo.all(published_only=True)) == len(repo.slugs()) == len(list(clone.glob("*/problem.toml")))
    original = repo.get(SLUG).statement

    # edited after the snapshot was made: students keep the published version
    (clone / SLUG / "statement.md").write_text((clone / SLUG / "statement.md").read_text() + EDIT)
    assert repo.get(SLUG).statement == original and EDIT.strip() not in ProblemRepository(clone).get(SLUG).statement
    listed = problems_list(clone)
    assert listed.returncode == 0, listed.stderr
    assert "REFUSED" not in listed.stdout and f"{SLUG} changed since it was published: students still get" in (
        listed.stderr
    )


def test_a_clone_edited_before_it_is_first_served_is_refused_not_served(
    clone: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    statement = clone / SLUG / "statement.md"
    statement.write_text(statement.read_text() + EDIT)
    version = published_version(clone / SLUG)
    assert version is not None

    with caplog.at_level(logging.INFO, logger="graders.problems.problem"):
        repo = ProblemRepository(clone)
        repo.get("checkpoint_dot_policy")  # the others are served from their new snapshots
        with pytest.raises(ProblemUnavailable, match=f"`remat-judge problems publish {SLUG}`"):
            repo.get(SLUG)
        with pytest.raises(ProblemUnavailable):
            repo.get(SLUG)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and f"`remat-judge problems publish {SLUG}`" in errors[0]  # once, not per request
    assert not snapshot_dir(clone, SLUG, version).exists()  # the edited folder never becomes the snapshot
    serving = repo.serving(SLUG)
    assert serving.students_get is None and serving.published and serving.changed and serving.refusal
    assert SLUG not in {p.slug for p in repo.all(published_only=True)} and len(repo.all()) == len(repo.slugs()) - 1

    # the server: the API says why (no draft), a student's page and a submission get nothing
    from tests.unit.test_course_pages import Site

    site = Site(tmp_path)
    site.services.problems = repo
    answer = site.client.get(f"/api/v1/problems/{SLUG}")
    assert answer.status_code == 503 and "remat-judge problems publish" in answer.text
    assert EDIT.strip() not in answer.text
    assert site.client.get(f"/problems/{SLUG}").status_code == 404
    submitted = site.client.post("/api/v1/submissions", json={"problem": SLUG, "source": "x = 1"})
    assert submitted.status_code == 404, submitted.text
    assert SLUG not in {p["slug"] for p in site.client.get("/api/v1/problems").json()}

    # `problems list` says what the server does
    listed = problems_list(clone)
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if SLUG in line]
    assert f"REFUSED ({version}" in row
    assert f"students, the API, LTI and grading get none of it until `remat-judge problems publish {SLUG}`" in (
        listed.stderr
    )
    assert "students still get" not in listed.stderr

    # only when the folder is the published version again is it made the snapshot
    statement.write_text(statement.read_text().replace(EDIT, ""))
    assert repo.get(SLUG).version == version and snapshot_dir(clone, SLUG, version).is_dir()
    assert EDIT.strip() not in repo.get(SLUG).statement


def test_two_processes_loading_a_clone_at_once_make_each_snapshot_once(clone: Path) -> None:
    barrier = threading.Barrier(8)
    served: list[str] = []
    failures: list[BaseException] = []

    def load() -> None:
        try:
            barrier.wait()
            served.append(ProblemRepository(clone).get(SLUG).version)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and set(served) == {published_version(clone / SLUG)}
    for slug_dir in (clone / VERSIONS).iterdir():  # one snapshot each, no temporary folder left
        assert [p.name for p in slug_dir.iterdir()] == [published_version(clone / slug_dir.name)]
