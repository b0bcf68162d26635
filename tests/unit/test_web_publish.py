"""The upload page's Publish button, fast (TestClient, real SQLite, no jail: the upload is recorded
as validation records it): admins only, CSRF-checked, publishing exactly the version the upload
validated with `graders.problems.publication.publish`; and the judge's `code` spans rendered as code,
escaped, in the verdict panel and the insight page's policy sentences."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from graders.problems.problem import load_problem
from graders.problems.publication import mark_unpublished, published_version, snapshot_dir
from server.store.accounts import SiteRole
from server.store.problems import UploadState, UploadStore
from server.store.submissions import SubmissionStore
from server.web.formatting import inline_code
from server.web.panel import render_panel
from tests.support import PROBLEMS
from tests.unit.test_course_pages import Site
from tests.unit.test_uploads import site_with_token

SLUG = "remat_sin_sin"


def installed_upload(site: Site, *, state: UploadState = UploadState.DONE) -> tuple[str, Path, str]:
    """remat_sin_sin installed unpublished, and an upload that validated and installed its version,
    recorded as `server.problems.uploads._validate` records it: (upload id, the problem's folder, version)."""
    root = site.services.settings.problems_dir / SLUG
    mark_unpublished(root)
    version = load_problem(root).version
    store = UploadStore(site.engine)
    upload_id = store.create(slug=SLUG, version=version, publish=False, requested_by="admin@uni.example", total_files=3)
    report = {"rows": [], "reference_failures": [], "warnings": [], "published": False, "previous_version": None}
    store.finish(upload_id, state=state, detail=f"installed version {version}, unpublished", report=report)
    return upload_id, root, version


def publish_form_token(html: str) -> str:
    found = re.search(r'id="publish-form">\s*<input type="hidden" name="csrf_token" value="([^"]+)"', html)
    assert found, "no Publish form on the page"
    return found.group(1)


def test_only_an_admin_with_the_forms_token_publishes(tmp_path: Path) -> None:
    site = site_with_token(tmp_path)
    upload_id, root, version = installed_upload(site)
    url = f"/instructor/problems/uploads/{upload_id}/publish"
    assert site.client.post(url, data={"csrf_token": "x"}, follow_redirects=False).status_code == 303  # sign in
    site.account("stu@uni.example", "Stu")
    site.account("admin@uni.example", "Ada", SiteRole.ADMIN)
    csrf = site.sign_in("stu@uni.example")
    assert site.client.post(url, data={"csrf_token": csrf}).status_code == 403
    assert site.client.get(f"/instructor/problems/uploads/{upload_id}").status_code == 403
    csrf = site.sign_in("admin@uni.example")
    page = site.client.get(f"/instructor/problems/uploads/{upload_id}")
    assert page.status_code == 200 and f"Publish version {version}" in page.text
    assert publish_form_token(page.text) == csrf
    for forged in ({"csrf_token": "not-the-token"}, {}):
        assert site.client.post(url, data=forged).status_code == 403
    assert published_version(root) is None and not snapshot_dir(root.parent, SLUG, version).exists()

    done = site.client.post(url, data={"csrf_token": csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/instructor/problems/uploads/{upload_id}"
    assert published_version(root) == version and snapshot_dir(root.parent, SLUG, version).is_dir()
    page = site.client.get(f"/instructor/problems/uploads/{upload_id}")
    assert 'id="publish-form"' not in page.text and "Published: students" in page.text
    assert "Installed and published" in page.text
    status = site.client.get(
        f"/api/v1/problems/uploads/{upload_id}", headers={"Authorization": "Bearer admin-upload-token"}
    )
    assert status.json()["published"] is True
    # twice is the same version published: nothing else changes
    assert site.client.post(url, data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert published_version(root) == version


def test_what_the_upload_did_not_validate_is_not_published(tmp_path: Path) -> None:
    site = site_with_token(tmp_path)
    site.account("admin@uni.example", "Ada", SiteRole.ADMIN)
    csrf = site.sign_in("admin@uni.example")
    upload_id, root, version = installed_upload(site)
    url = f"/instructor/problems/uploads/{upload_id}/publish"

    # a TODO left: listed, in the red box, refused by the same function `problems publish` uses
    statement = root / "statement.md"
    original = statement.read_text()
    statement.write_text(original + "\nTODO: the last section\n")
    todo_version = load_problem(root).version
    page = site.client.get(f"/instructor/problems/uploads/{upload_id}")
    assert "another version now" in page.text and 'id="publish-form"' not in page.text  # edited: not this version
    todo_upload, _, _ = installed_upload(site)
    assert UploadStore(site.engine).get(todo_upload).version == todo_version  # type: ignore[union-attr]
    page = site.client.get(f"/instructor/problems/uploads/{todo_upload}")
    assert "Not publishable while 1 TODO is left" in page.text and "TODO: the last section" in page.text
    refused = site.client.post(f"/instructor/problems/uploads/{todo_upload}/publish", data={"csrf_token": csrf})
    assert refused.status_code == 422
    box = re.search(r'<p class="publish-error" role="alert" id="publish-error">(.*?)</p>', refused.text, re.S)
    assert box and "1 TODO left" in box.group(1) and "statement.md:" in box.group(1)
    assert published_version(root) is None

    # the folder is another version than the upload validated: 409, nothing published
    refused = site.client.post(url, data={"csrf_token": csrf})
    assert refused.status_code == 409 and f"not version {version}" in refused.text
    statement.write_text(original)
    shutil.rmtree(root)
    assert site.client.post(url, data={"csrf_token": csrf}).status_code == 409  # gone altogether

    # an upload that failed validation installed nothing
    shutil.copytree(PROBLEMS / SLUG, root)
    failed, _, _ = installed_upload(site, state=UploadState.FAILED)
    assert (
        site.client.post(f"/instructor/problems/uploads/{failed}/publish", data={"csrf_token": csrf}).status_code == 409
    )
    assert published_version(root) is None
    missing = site.client.post("/instructor/problems/uploads/" + "0" * 32 + "/publish", data={"csrf_token": csrf})
    assert missing.status_code == 404


def test_backtick_spans_render_as_code_and_nothing_else_as_html() -> None:
    assert str(inline_code("saves f32[8] from `dot_general`")) == "saves f32[8] from <code>dot_general</code>"
    hostile = str(inline_code('`<img src=x onerror="alert(1)">` and <script>x()</script> & a lone ` tick'))
    assert hostile == (
        "<code>&lt;img src=x onerror=&#34;alert(1)&#34;&gt;</code> and &lt;script&gt;x()&lt;/script&gt; "
        "&amp; a lone ` tick"
    )
    assert str(inline_code("a `b\nc` d")) == "a `b\nc` d"  # a span does not cross lines


def test_the_panel_shows_check_messages_code_as_code(tmp_path: Path) -> None:
    report = json.loads((Path(__file__).parents[2] / "web" / "dev" / "verdicts" / "wrong_policy.json").read_text())
    failed = next(c for c in report["checks"] if not c.get("passed", True))
    failed["message"] = "you save f32[64,256] from `maximum` and <b>not</b> `dot_general`"
    html = render_panel(report, "abc")
    assert "from <code>maximum</code> and &lt;b&gt;not&lt;/b&gt; <code>dot_general</code>" in html
    assert "`" not in re.sub(r"<pre.*?</pre>", "", html, flags=re.S)  # no backtick left as text


def test_the_insight_page_renders_policy_code_as_code(tmp_path: Path) -> None:
    from graders.insight import fingerprint

    site = Site(tmp_path)
    admin = site.account("admin@uni.example", "Ada", SiteRole.ADMIN)
    site.sign_in("admin@uni.example")
    report = json.loads((Path(__file__).parents[2] / "web" / "dev" / "verdicts" / "wrong_policy.json").read_text())
    found = fingerprint(report)
    assert found is not None and "`maximum`" in found.summary
    store = SubmissionStore(site.engine)  # as a worker does
    record = store.create(problem="checkpoint_dot_policy", source="x = 1", user_id=admin.id)
    assert store.claim(record.id, worker_id="w", lease_s=60, max_attempts=3).record is not None
    assert store.finish(
        record.id,
        verdict=report["verdict"],
        score=0.0,
        problem_version="v1",
        result_json=json.dumps(report),
        worker_id="w",
        policy_fingerprint=found.key,
    )
    page = site.client.get("/instructor/problems/checkpoint_dot_policy/insight")
    assert page.status_code == 200
    cell = re.search(r'<td class="policy" data-label="What the policy does">(.*?)</td>', page.text, re.S)
    assert cell and "from <code>maximum</code>" in cell.group(1) and "`" not in cell.group(1)
