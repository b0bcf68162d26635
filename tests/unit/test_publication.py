"""Published and unpublished problems, fast: the `.published` marker, TODO detection, installing
an upload, where the folders come from, and what students, instructors and API clients see."""

from __future__ import annotations

import io
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from graders.problems.problem import ProblemRepository, load_problem
from graders.problems.publication import (
    MARKER,
    TODO_FILES,
    TodosLeft,
    mark_published,
    mark_unpublished,
    publication,
    published_version,
    todos,
)
from graders.problems.scaffold import scaffold
from server.platform.folders import folder, source_of
from server.problems.packages import install, pack, staged_package
from server.store.accounts import SiteRole
from tests.support import PROBLEMS

SHIPPED = "remat_sin_sin"


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    """A problems folder with a published copy of a shipped problem and a new scaffold."""
    root = tmp_path / "problems"
    shutil.copytree(PROBLEMS / SHIPPED, root / SHIPPED, ignore=shutil.ignore_patterns("__pycache__"))
    scaffold(root, "fresh_problem")
    return root


# --- the marker ---------------------------------------------------------------------------------------


def test_every_shipped_problem_is_published_at_its_current_version() -> None:
    repo = ProblemRepository(PROBLEMS)
    working = [repo.working(slug) for slug in repo.slugs()]
    stale = {
        p.slug: (published_version(p.root), p.version)
        for p in working
        if publication(p.root, p.version).changed or not publication(p.root, p.version).published
    }
    assert stale == {}, "run `remat-judge problems publish SLUG` for each (marker, version) pair"
    assert len(repo.all(published_only=True)) == len(repo.slugs()) == len(list(PROBLEMS.glob("*/problem.toml")))


def test_the_marker_records_the_published_version_and_a_change_is_flagged(problems: Path) -> None:
    repo = ProblemRepository(problems)
    fresh = repo.get("fresh_problem")
    assert not repo.is_published("fresh_problem") and not publication(fresh.root, fresh.version).published
    assert [p.slug for p in repo.all(published_only=True)] == [SHIPPED]
    assert [p.slug for p in repo.all()] == ["fresh_problem", SHIPPED]

    mark_published(fresh.root, fresh.version)
    assert (fresh.root / MARKER).read_text() == fresh.version + "\n"
    state = publication(fresh.root, fresh.version)
    assert state.published and not state.changed and repo.is_published("fresh_problem")

    # a changed reference is a new version: still published (a course keeps it), flagged as changed
    reference = fresh.root / "reference.py"
    reference.write_text(reference.read_text() + "\n# changed\n")
    changed = load_problem(fresh.root)
    state = publication(changed.root, changed.version)
    assert changed.version != fresh.version and state.published and state.changed
    assert state.published_version == fresh.version

    assert mark_unpublished(fresh.root) and not mark_unpublished(fresh.root)
    assert not repo.is_published("fresh_problem")
    assert not repo.is_published("../problems") and not repo.is_published("no_such_problem")


def test_the_marker_does_not_change_the_version(problems: Path) -> None:
    before = load_problem(problems / "fresh_problem").version
    mark_published(problems / "fresh_problem", before)
    assert load_problem(problems / "fresh_problem").version == before


# --- TODOs ----------------------------------------------------------------------------------------------


def test_the_scaffold_has_todos_in_what_students_read_and_a_shipped_problem_none(problems: Path) -> None:
    left = todos(problems / "fresh_problem")
    assert {line.split(":")[0] for line in left} == {"problem.toml", "statement.md", "starter.py", "hints.md"}
    assert 'problem.toml:4: title = "TODO: a short title"' in left
    assert todos(problems / SHIPPED) == []


def test_a_todo_is_a_whole_word_in_the_checked_files_only(problems: Path) -> None:
    root = problems / SHIPPED
    (root / "wrong" / "extra.py").write_text("# expect: WRONG_POLICY\n# TODO in wrong/ is fine\n")
    (root / "starter.py").write_text((root / "starter.py").read_text() + "\n# TODOS and MASTODON are words\n")
    assert todos(root) == []
    (root / "reference.py").write_text((root / "reference.py").read_text() + "\n    # TODO: check this\n")
    assert todos(root) == [f"reference.py:{len((root / 'reference.py').read_text().splitlines())}: # TODO: check this"]


# --- installing an upload ---------------------------------------------------------------------------------


def test_an_installed_package_is_unpublished_unless_asked_and_a_replacement_keeps_the_state(
    problems: Path, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    source = tmp_path / "src" / "fresh_problem"
    shutil.copytree(problems / "fresh_problem", source)
    for name in TODO_FILES:  # published below: written (install publishes as `problems publish` does)
        (source / name).write_text((source / name).read_text().replace("TODO", "Written"))
    mark_published(source, "forged")  # a marker is never packed nor taken from an archive
    with tarfile.open(fileobj=io.BytesIO(pack(source))) as tar:
        assert "problem.toml" in tar.getnames() and MARKER not in tar.getnames()
    shutil.rmtree(problems / "fresh_problem")

    with staged_package(pack(source), problems) as staged:
        target = install(staged.root, problems, history)
    assert published_version(target) is None

    with staged_package(pack(source), problems) as staged:
        install(staged.root, problems, history, publish_version=staged.version)
    assert published_version(target) == load_problem(target).version

    # a new version of a published problem stays published with the marker of the validated version
    validated = load_problem(target).version
    (source / "reference.py").write_text((source / "reference.py").read_text() + "\n# v2\n")
    with staged_package(pack(source), problems) as staged:
        install(staged.root, problems, history)
    state = publication(target, load_problem(target).version)
    assert state.published and state.changed and state.published_version == validated

    # publishing on arrival refuses a TODO, as `problems publish` does, and installs nothing
    (source / "hints.md").write_text("TODO: a hint\n")
    with staged_package(pack(source), problems) as staged, pytest.raises(TodosLeft):
        install(staged.root, problems, history, publish_version=staged.version)
    assert load_problem(target).version == state.version


# --- where the folders come from ---------------------------------------------------------------------------


def test_a_folder_comes_from_the_flag_then_the_variable_then_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REMAT_JUDGE_PROBLEMS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    from server.settings import Settings

    assert Settings().problems_dir.resolve() == tmp_path / "problems"
    assert source_of("problems", flag_given=False) == "the working directory"
    assert (
        folder("problems", Path("problems"), flag_given=False).describe()
        == f"problems: {tmp_path / 'problems'} (from the working directory)"
    )
    monkeypatch.setenv("REMAT_JUDGE_PROBLEMS_DIR", str(tmp_path / "elsewhere"))
    assert Settings().problems_dir == tmp_path / "elsewhere"
    assert source_of("problems", flag_given=False) == "REMAT_JUDGE_PROBLEMS_DIR"
    assert source_of("problems", flag_given=True) == "--problems-dir"
    assert source_of("data", flag_given=False) in ("the working directory", "REMAT_JUDGE_DATA_DIR")


# --- who sees what ------------------------------------------------------------------------------------------


def test_an_unpublished_problem_is_the_instructors_only_until_published(problems: Path) -> None:
    from tests.unit.test_course_pages import Site

    site = Site(problems.parent)
    site.services.problems = ProblemRepository(problems)
    site.services.settings = site.services.settings.model_copy(update={"instructor_token": "prof-token"})
    site.account("stu@uni.example", "Stu")
    site.account("prof@uni.example", "Prof", SiteRole.ADMIN)
    client = site.client

    def api_slugs(**headers: str) -> set[str]:
        return {p["slug"] for p in client.get("/api/v1/problems", headers=headers).json()}

    # students and API clients: absent from the lists, 404 for the page, the API and submitting
    assert "/problems/fresh_problem" not in client.get("/").text
    assert client.get("/problems/fresh_problem").status_code == 404
    assert api_slugs() == {SHIPPED}
    assert client.get("/api/v1/problems/fresh_problem").status_code == 404
    assert client.post("/api/v1/submissions", json={"problem": "fresh_problem", "source": "x = 1"}).status_code == 404
    csrf = site.sign_in("stu@uni.example")
    assert "/problems/fresh_problem" not in client.get("/").text
    assert client.get("/problems/fresh_problem").status_code == 404
    answer = client.post(
        "/problems/fresh_problem/submit",
        data={"source": "x = 1", "csrf_token": csrf},
        headers={"Accept": "application/json"},
    )
    assert answer.status_code == 404

    # the instructor (web) and the instructor token (API): listed, marked, readable, gradeable
    assert api_slugs(Authorization="Bearer prof-token") == {SHIPPED, "fresh_problem"}
    listed = {
        p["slug"]: p["published"]
        for p in client.get("/api/v1/problems", headers={"Authorization": "Bearer prof-token"}).json()
    }
    assert listed == {SHIPPED: True, "fresh_problem": False}
    token = {"Authorization": "Bearer prof-token"}
    assert client.get("/api/v1/problems/fresh_problem", headers=token).status_code == 200
    csrf = site.sign_in("prof@uni.example")
    page = client.get("/").text
    assert "/problems/fresh_problem" in page and re.search(r"fresh_problem · <span[^>]*>unpublished<", page)
    assert client.get("/problems/fresh_problem").status_code == 200
    answer = client.post(
        "/problems/fresh_problem/submit",
        data={"source": "x = 1", "csrf_token": csrf},
        headers={"Accept": "application/json"},
    )
    assert answer.status_code == 201, answer.text

    # published: students see it
    mark_published(problems / "fresh_problem", load_problem(problems / "fresh_problem").version)
    site.sign_in("stu@uni.example")
    assert "/problems/fresh_problem" in client.get("/").text
    assert client.get("/problems/fresh_problem").status_code == 200
    assert api_slugs() == {SHIPPED, "fresh_problem"}


def test_students_keep_the_published_version_while_the_folder_is_edited(tmp_path: Path) -> None:
    """Publish, edit, publish: the statement, starter and grading students get change only when a
    version is published; the working folder is the author's."""
    from fastapi.testclient import TestClient

    from graders.problems.publication import snapshot_dir, take_snapshot
    from tests.unit.test_course_pages import Site

    problems = tmp_path / "problems"
    shutil.copytree(PROBLEMS / "remat_sin_sin", problems / "remat_sin_sin")
    repo = ProblemRepository(problems)
    site = Site(tmp_path)
    site.services.problems = repo
    client: TestClient = site.client
    first = repo.working("remat_sin_sin")
    mark_published(first.root, first.version)  # published before snapshots existed: taken on first use

    def statement() -> str:
        return client.get("/api/v1/problems/remat_sin_sin").json()["statement"]

    original = statement()
    assert snapshot_dir(problems, "remat_sin_sin", first.version).is_dir()
    (first.root / "statement.md").write_text("# A draft\n\nWork in progress.\n")
    (first.root / "reference.py").write_text("raise SystemExit('half-edited')\n")
    assert statement() == original  # the draft (and its broken reference) reach nobody
    assert repo.get("remat_sin_sin").version == first.version and repo.changed_since_publish("remat_sin_sin")
    assert repo.get("remat_sin_sin").reference_path.read_text().startswith('"""Reference solution')
    shutil.copy(PROBLEMS / "remat_sin_sin" / "reference.py", first.root / "reference.py")
    second = repo.working("remat_sin_sin")
    take_snapshot(second.root, problems, second.version)  # what `problems publish` does once it validated
    mark_published(second.root, second.version)
    assert statement().startswith("# A draft") and repo.get("remat_sin_sin").version == second.version
    assert snapshot_dir(problems, "remat_sin_sin", first.version).is_dir()  # kept: immutable
    assert not repo.changed_since_publish("remat_sin_sin")
