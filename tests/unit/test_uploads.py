"""Uploads' quick checks, fast (TestClient, real SQLite, no jail): what can be said at once is said at
once, every problem.toml, `# expect:` and misplaced-file error together with "did you mean", never
a path of the server, and nothing left in the staging folder; the upload page and status are for admins only."""

from __future__ import annotations

import io
import re
import shutil
import tarfile
from pathlib import Path

from fastapi.testclient import TestClient

from server.problems.packages import pack
from server.store.accounts import SiteRole
from tests.support import PROBLEMS
from tests.unit.test_course_pages import Site

TOKEN = "admin-upload-token"


def site_with_token(tmp_path: Path) -> Site:
    site = Site(tmp_path)
    problems = tmp_path / "problems"
    shutil.copytree(PROBLEMS / "remat_sin_sin", problems / "remat_sin_sin")
    site.services.settings = site.services.settings.model_copy(
        update={"instructor_token": TOKEN, "problems_dir": problems}
    )
    return site


def broken_package(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "typo_problem"
    shutil.copytree(PROBLEMS / "remat_sin_sin", root)
    toml = (root / "problem.toml").read_text().replace('slug = "remat_sin_sin"', 'slug = "typo_problem"')
    toml = toml.replace("title = ", 'titel = "x"\ntitle = ').replace("[memory]", "[memory]\nrulle = 1")
    (root / "problem.toml").write_text(toml)
    (root / "wrong" / "no_checkpoint.py").write_text("# expect: WRONG_POLCY\nimport jax\n")
    (root / "wrong" / "sin_squared.py").write_text("import jax\n")
    (root / "refrence.py").write_text("x = 1\n")  # a misplaced file: never read
    return root


EVERY_ERROR = (
    "typo_problem/problem.toml: titel: unknown key (did you mean 'title'?)",
    "typo_problem/problem.toml: memory.rulle: unknown key (did you mean 'rule'?)",
    "typo_problem/wrong/no_checkpoint.py: the first line must be `# expect: VERDICT`",
    "(did you mean WRONG_POLICY?)",
    "typo_problem/wrong/sin_squared.py: the first line must be `# expect: VERDICT`",
    "typo_problem/refrence.py: not a package file (did you mean reference.py?)",
)


def test_every_error_of_a_package_at_once_and_no_server_path(tmp_path: Path) -> None:
    site = site_with_token(tmp_path)
    answer = site.client.post(
        "/api/v1/problems",
        content=pack(broken_package(tmp_path)),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/gzip"},
    )
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    for expected in EVERY_ERROR:  # the toml's, the expect lines' and the files' errors in one answer
        assert expected in detail, detail
    problems = site.services.settings.problems_dir
    assert str(problems) not in detail and str(tmp_path) not in detail and ".staging" not in detail
    assert not list((problems / ".staging").glob("*"))


def test_a_missing_file_is_reported_with_the_other_errors(tmp_path: Path) -> None:
    site = site_with_token(tmp_path)
    root = broken_package(tmp_path)
    (root / "starter.py").unlink()
    answer = site.client.post(
        "/api/v1/problems",
        content=pack(root),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/gzip"},
    )
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    for expected in ("typo_problem: missing starter.py", *EVERY_ERROR):
        assert expected in detail, detail
    assert str(tmp_path) not in detail


def test_the_upload_page_and_status_are_for_admins(tmp_path: Path) -> None:
    site = site_with_token(tmp_path)
    site.account("stu@uni.example", "Stu")
    site.account("admin@uni.example", "Ada", SiteRole.ADMIN)
    assert site.client.get("/instructor/problems/upload", follow_redirects=False).status_code == 303
    site.sign_in("stu@uni.example")
    assert site.client.get("/instructor/problems/upload").status_code == 403
    assert site.client.get("/api/v1/problems/uploads/" + "0" * 32).status_code == 401
    csrf = site.sign_in("admin@uni.example")
    page = site.client.get("/instructor/problems/upload")
    assert page.status_code == 200 and 'enctype="multipart/form-data"' in page.text
    refused = site.client.post(
        "/instructor/problems/upload",
        data={"csrf_token": csrf},
        files={"package": ("typo.tar.gz", pack(broken_package(tmp_path)), "application/gzip")},
    )
    assert refused.status_code == 400
    shown = re.search(r'<pre class="error upload-error"[^>]*>(.*?)</pre>', refused.text, re.S).group(1)  # type: ignore[union-attr]
    assert "did you mean &#39;title&#39;?" in shown and str(tmp_path) not in shown
    assert "wrong/no_checkpoint.py: the first line must be `# expect: VERDICT`" in shown  # with the toml's
    assert "refrence.py: not a package file (did you mean reference.py?)" in shown
    assert site.client.post("/instructor/problems/upload", data={"csrf_token": csrf}).status_code == 400
    assert site.client.get("/instructor/problems/uploads/" + "0" * 32).status_code == 404
    assert (
        site.client.get("/api/v1/problems/uploads/not-an-id", headers={"Authorization": f"Bearer {TOKEN}"}).status_code
        == 404
    )


def test_a_hostile_archive_through_the_page_writes_nothing(tmp_path: Path) -> None:
    site = site_with_token(tmp_path)
    site.account("admin@uni.example", "Ada", SiteRole.ADMIN)
    csrf = site.sign_in("admin@uni.example")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("problem.toml")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    answer = site.client.post(
        "/instructor/problems/upload",
        data={"csrf_token": csrf},
        files={"package": ("evil.tar.gz", buffer.getvalue(), "application/gzip")},
    )
    assert answer.status_code == 400 and "not a regular file" in answer.text
    problems = site.services.settings.problems_dir
    assert sorted(p.name for p in problems.iterdir() if not p.name.startswith(".")) == ["remat_sin_sin"]
    client = TestClient(site.client.app)
    assert (
        client.post("/instructor/problems/upload", data={"csrf_token": "x"}, follow_redirects=False).status_code == 303
    )
