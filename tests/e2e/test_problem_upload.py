"""Instructor workflow against a real server: upload, validation before publishing, versions,
hostile archives, and the CLI's `problems new`, `problems validate` and `problems add`."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from graders.pipeline import JudgeConfig
from graders.problems.publication import TODO_FILES
from server.problems.packages import pack
from tests.support import PROBLEMS, Server

pytestmark = [pytest.mark.e2e, pytest.mark.jail]
CLI = str(Path(sys.executable).parent / "remat-judge")
TOKEN = "instructor-test-token"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, judge_config: JudgeConfig) -> Iterator[tuple[str, Path, Path]]:
    """A server with its own problems folder (a copy of checkpoint_dot_policy) and an instructor token."""
    root = tmp_path_factory.mktemp("site")
    problems, data = root / "problems", root / "data"
    problems.mkdir()
    shutil.copytree(PROBLEMS / "checkpoint_dot_policy", problems / "checkpoint_dot_policy")
    server = Server(
        data,
        env={
            "REMAT_JUDGE_INSTRUCTOR_TOKEN": TOKEN,
            "REMAT_JUDGE_PROBLEMS_DIR": str(problems),
            "REMAT_JUDGE_HIDDEN_SEED": "upload-seed",
        },
    ).start()
    yield server.url, problems, root
    server.stop()


def new_package(tmp: Path, slug: str) -> Path:
    """`remat-judge problems new` in a scratch folder; the scaffold validates as it is."""
    result = subprocess.run([CLI, "problems", "new", slug, "--problems-dir", str(tmp)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return tmp / slug


class Finished:
    """Where an upload ended: the POST's own answer when it refused at once (400, 401, 422), else
    the last status of the upload it started, as 201 (installed) or 422 (failed)."""

    def __init__(self, status_code: int, body: dict, polls: int = 0):
        self.status_code, self.body, self.polls = status_code, body, polls
        self.text = str(body)

    def json(self) -> dict:
        return self.body


def upload(url: str, data: bytes, token: str | None = TOKEN, *, publish: bool = False) -> Finished:
    """POSTs a package and, once it answers 202, polls its status_url until validation ends."""
    import time

    headers = {"Content-Type": "application/gzip"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    started = httpx.post(
        f"{url}/api/v1/problems",
        content=data,
        headers=headers,
        timeout=60,
        params={"publish": "true"} if publish else None,
    )
    if started.status_code != 202:
        return Finished(started.status_code, started.json() if started.content else {})
    body = started.json()
    assert started.headers["location"] == body["status_url"] and body["state"] == "validating"
    polls = 0
    while body["state"] == "validating":
        time.sleep(0.5)
        body = httpx.get(url + body["status_url"], headers=headers, timeout=30).json()
        polls += 1
        assert 0 <= body["progress"]["done"] <= body["progress"]["total"]
    return Finished(201 if body["state"] == "done" else 422, body, polls)


def fill_todos(folder: Path) -> None:
    """Writes every part the scaffold left as TODO (here: the word "Written")."""
    for name in TODO_FILES:
        path = folder / name
        path.write_text(path.read_text().replace("TODO", "Written"))


def test_upload_needs_the_instructor_token(site: tuple[str, Path, Path], tmp_path: Path) -> None:
    url, problems, _ = site
    package = pack(new_package(tmp_path, "token_check"))
    assert upload(url, package, token=None).status_code == 401
    assert upload(url, package, token="guess").status_code == 401
    assert not (problems / "token_check").exists()


def test_a_valid_upload_is_served_at_once_and_a_change_makes_a_new_version(
    site: tuple[str, Path, Path], tmp_path: Path
) -> None:
    url, problems, root = site
    folder = new_package(tmp_path, "uploaded_sin")
    first = upload(url, pack(folder))
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["slug"] == "uploaded_sin" and body["previous_version"] is None and body["published"] is False
    assert [(r["file"], r["got"], r["ok"]) for r in body["rows"]] == [
        ("reference.py", "ACCEPTED", True),
        ("right/decorator_remat.py", "ACCEPTED", True),
        ("wrong/no_checkpoint.py", "WRONG_POLICY", True),
    ]
    assert body["rows"][2]["recompute_flops"] == 0  # no checkpoint: nothing recomputed
    # unpublished: the instructor token sees it; students and API clients do not, nor submit to it
    instructor = {"Authorization": f"Bearer {TOKEN}"}
    listed = {p["slug"]: p for p in httpx.get(f"{url}/api/v1/problems", headers=instructor).json()}
    assert listed["uploaded_sin"]["version"] == body["version"] and listed["uploaded_sin"]["published"] is False
    assert "uploaded_sin" not in {p["slug"] for p in httpx.get(f"{url}/api/v1/problems").json()}
    assert httpx.get(f"{url}/api/v1/problems/uploaded_sin").status_code == 404
    assert (
        httpx.post(f"{url}/api/v1/submissions", json={"problem": "uploaded_sin", "source": "x = 1"}).status_code == 404
    )

    # publish=true refuses while the scaffold's TODOs are left, and publishes once they are written
    refused = upload(url, pack(folder), publish=True)
    assert refused.status_code == 422 and "TODOs left" in refused.json()["detail"] and refused.polls == 0
    fill_todos(folder)
    published = upload(url, pack(folder), publish=True)
    assert published.status_code == 201, published.text
    assert published.json()["published"] is True and published.json()["previous_version"] == body["version"]
    body = published.json()
    listed = {p["slug"]: p for p in httpx.get(f"{url}/api/v1/problems").json()}
    assert listed["uploaded_sin"]["version"] == body["version"]

    # a submission is judged against, and records, the version it saw
    source = (folder / "reference.py").read_text()
    graded = httpx.post(
        f"{url}/api/v1/submissions",
        params={"wait": "true"},
        timeout=120,
        json={"problem": "uploaded_sin", "source": source},
    ).json()
    assert graded["verdict"] == "ACCEPTED" and graded["problem_version"] == body["version"]

    # change the case set: a new version replaces the old, which is kept in history
    toml = (folder / "problem.toml").read_text().replace("dims = { N = 1048576 }", "dims = { N = 524288 }")
    (folder / "problem.toml").write_text(toml)
    second = upload(url, pack(folder))
    assert second.status_code == 201, second.text
    assert second.json()["previous_version"] == body["version"] != second.json()["version"]
    assert second.json()["published"] is True  # a published problem stays published (flagged as changed)
    assert (problems / "uploaded_sin" / ".published").read_text().strip() == body["version"]
    # ... and students keep the published version until it is published again (immutable versions)
    assert httpx.get(f"{url}/api/v1/problems/uploaded_sin").json()["version"] == body["version"]
    assert any(p.name.startswith("uploaded_sin-") for p in (root / "data" / "problem-history").iterdir())
    old = httpx.get(f"{url}/api/v1/submissions/{graded['id']}").json()
    assert old["problem_version"] == body["version"]


def test_a_package_that_does_not_validate_is_not_published(site: tuple[str, Path, Path], tmp_path: Path) -> None:
    url, problems, _ = site
    folder = new_package(tmp_path, "bad_expectation")
    wrong = folder / "wrong" / "no_checkpoint.py"
    wrong.write_text(wrong.read_text().replace("# expect: WRONG_POLICY", "# expect: WRONG_ANSWER"))
    response = upload(url, pack(folder))
    assert response.status_code == 422
    rows = {r["file"]: r for r in response.json()["rows"]}
    assert rows["wrong/no_checkpoint.py"]["got"] == "WRONG_POLICY" and not rows["wrong/no_checkpoint.py"]["ok"]
    assert not (problems / "bad_expectation").exists()
    assert httpx.get(f"{url}/api/v1/problems/bad_expectation").status_code == 404


def test_an_upload_lists_the_toml_expect_line_and_file_errors_in_one_answer(
    site: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """Two misspelt keys, a bad `# expect:` line and a misplaced file: one 400 names all of them,
    so the author fixes the package in one round."""
    url, problems, _ = site
    folder = new_package(tmp_path, "many_mistakes")
    toml = (folder / "problem.toml").read_text()
    toml = toml.replace("title = ", 'titel = "x"\ntitle = ', 1).replace("[memory]", "[memory]\nrulle = 1", 1)
    (folder / "problem.toml").write_text(toml)
    wrong = folder / "wrong" / "no_checkpoint.py"
    wrong.write_text(wrong.read_text().replace("# expect: WRONG_POLICY", "# expect: WRONG_POLCY"))
    (folder / "statment.md").write_text("# misplaced\n")
    response = upload(url, pack(folder))
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    for expected in (
        "many_mistakes/problem.toml: titel: unknown key (did you mean 'title'?)",
        "many_mistakes/problem.toml: memory.rulle: unknown key (did you mean 'rule'?)",
        "many_mistakes/wrong/no_checkpoint.py: the first line must be `# expect: VERDICT`",
        "(did you mean WRONG_POLICY?)",
        "many_mistakes/statment.md: not a package file (did you mean statement.md?)",
    ):
        assert expected in detail, detail
    assert str(problems) not in detail and not (problems / "many_mistakes").exists()


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, content in members:
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def _file(name: str, content: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(content)
    return info, content


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.mark.parametrize(
    "archive,reason",
    [
        (b"not an archive at all", "not a tar archive"),
        (_tar([_file("../../evil.py", b"x")]), "unsafe path"),
        (_tar([_file("/etc/evil.toml", b"x")]), "unsafe path"),
        (_tar([_file("problem.toml", b'slug = "linked"'), _link("reference.py", "/etc/passwd")]), "not a regular file"),
        (
            _tar([_file("problem.toml", b'slug = "linked"'), _link("reference.py", "problem.toml", tarfile.LNKTYPE)]),
            "not a regular file",
        ),
        (_tar([_file("problem.toml", b'slug = "binary"'), _file("payload.so", b"\x7fELF")]), "only"),
        (_tar([_file("statement.md", b"# no toml")]), "no problem.toml"),
        (_tar([_file("problem.toml", b'slug = "../../etc"')]), "no valid slug"),
        (
            _tar([_file("problem.toml", b'slug = "clash"'), _file("hints.md", b"x"), _file("hints.md/x.py", b"x")]),
            "both a file and a folder",
        ),
        (
            _tar([_file("problem.toml", b'slug = "clash"'), _file("wrong/a.py/b.py", b"x"), _file("wrong/a.py", b"x")]),
            "both a file and a folder",
        ),
        (_tar([_file("problem.toml", b'slug = "twice"'), _file("problem.toml", b'slug = "other"')]), "appears twice"),
    ],
)
def test_hostile_archives_are_refused_and_write_nothing(
    site: tuple[str, Path, Path], archive: bytes, reason: str
) -> None:
    url, problems, _ = site
    before = sorted(p.name for p in problems.iterdir())
    response = upload(url, archive)
    assert response.status_code == 400, response.text
    assert reason in response.json()["detail"]
    assert sorted(p.name for p in problems.iterdir()) == before
    assert not list((problems / ".staging").glob("*")) if (problems / ".staging").exists() else True
    assert not Path("/etc/evil.toml").exists()


def test_cli_new_validate_add_locally(tmp_path: Path, judge_config: JudgeConfig) -> None:
    problems = tmp_path / "problems"
    scratch = tmp_path / "scratch"
    folder = new_package(scratch, "local_sin")
    env = {**os.environ, "REMAT_JUDGE_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}
    validate = subprocess.run(
        [CLI, "problems", "validate", "local_sin", "--problems-dir", str(scratch)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "wrong/no_checkpoint.py" in validate.stdout and "MISMATCH" not in validate.stdout
    add = subprocess.run(
        [CLI, "problems", "add", str(folder), "--problems-dir", str(problems)], capture_output=True, text=True, env=env
    )
    assert add.returncode == 0, add.stdout + add.stderr
    assert (problems / "local_sin" / "reference.py").is_file()
    assert "unpublished (admins only)" in add.stdout
    # publish refuses while a TODO is left, then validates and publishes
    publish = [CLI, "problems", "publish", "local_sin", "--problems-dir", str(problems)]
    refused = subprocess.run(publish, capture_output=True, text=True, env=env)
    assert refused.returncode == 1 and "TODOs left in local_sin" in refused.stderr
    fill_todos(problems / "local_sin")
    published = subprocess.run(publish, capture_output=True, text=True, env=env)
    assert published.returncode == 0, published.stdout + published.stderr
    assert "published local_sin version" in published.stdout
    listing = subprocess.run(
        [CLI, "problems", "list", "--problems-dir", str(problems)], capture_output=True, text=True, env=env
    )
    assert re.search(r"local_sin .* yes", listing.stdout), listing.stdout
    # a broken expectation makes validate fail and add refuse
    wrong = folder / "wrong" / "no_checkpoint.py"
    wrong.write_text(wrong.read_text().replace("WRONG_POLICY", "ACCEPTED", 1))
    bad = subprocess.run(
        [CLI, "problems", "validate", "local_sin", "--problems-dir", str(scratch)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout


@pytest.mark.parametrize("check", ["finite_difference", "deterministic"])
def test_an_uploaded_reference_that_fails_its_self_check_is_reported_and_not_installed(
    site: tuple[str, Path, Path], tmp_path: Path, check: str
) -> None:
    from tests.unit.test_reference_checks import MISTAKES

    url, problems, root = site
    folder = new_package(tmp_path, f"mistake_{check}")
    (folder / "reference.py").write_text(
        MISTAKES[check]
        .replace("remat_sin_sin", f"mistake_{check}")
        .replace("(x)\n", "(x).sum()\n")
        .replace("return f(x) + 0.5", "return (f(x) + 0.5")
        .replace(" - 0.5 * x\n", " - 0.5 * x).sum()\n")
    )
    answer = upload(url, pack(folder))
    body = answer.json()
    assert answer.status_code == 422 and body["state"] == "failed", body
    assert [f["check"] for f in body["reference_failures"]][:1] == [check] and body["rows"] == []
    assert "no file was graded" in body["detail"]
    assert str(root) not in str(body) and "/tmp" not in str(body)
    assert not (problems / f"mistake_{check}").exists()
