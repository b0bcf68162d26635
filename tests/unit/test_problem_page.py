"""The problem page's learning aids, fast (TestClient, real SQLite): the task first, the raw source
of one's own past submission for "load into editor", the list's course order and progress."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from graders.problems.problem import ProblemRepository
from graders.problems.publication import VERSIONS, content_version, mark_published, mark_unpublished
from server.store.accounts import SiteRole
from server.web.markdown import split_section
from tests.support import PROBLEMS
from tests.unit.test_course_pages import DUE, Site


def test_split_section_takes_the_heading_to_the_next_one_and_ignores_code() -> None:
    text = "intro\n## A\na\n```\n## The task\n```\n## The task\nt1\nt2\n## B\nb\n"
    task, rest = split_section(text, "The task")
    assert task == "## The task\nt1\nt2\n"
    assert rest == "intro\n## A\na\n```\n## The task\n```\n## B\nb\n"
    assert split_section("no such", "The task") == ("", "no such")


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def test_the_task_comes_first_with_the_signature(site: Site) -> None:
    page = site.client.get("/problems/remat_sin_sin").text
    assert page.index('id="task"') < page.index("Why rematerialization matters")
    assert "<code>remat_sin_sin(x)</code>" in page


def test_a_past_submission_source_is_its_authors_and_instructors_only(site: Site) -> None:
    ada = site.account("ada@uni.example", "Ada")
    site.account("bob@uni.example", "Bob")
    site.account("prof@uni.example", "Prof", SiteRole.ADMIN)
    record = site.services.submissions.create(problem="remat_sin_sin", source="```\n</pre><b>x</b>\n", user_id=ada.id)
    site.sign_in("ada@uni.example")
    answer = site.client.get(f"/submissions/{record.id}/source.py")
    assert answer.status_code == 200 and answer.text == "```\n</pre><b>x</b>\n"
    assert (
        answer.headers["content-type"].startswith("text/plain")
        and answer.headers["x-content-type-options"] == "nosniff"
    )
    assert f'href="/submissions/{record.id}/source.py"' in site.client.get("/problems/remat_sin_sin").text
    site.sign_in("bob@uni.example")
    assert site.client.get(f"/submissions/{record.id}/source.py").status_code == 404
    site.sign_in("prof@uni.example")
    assert site.client.get(f"/submissions/{record.id}/source.py").status_code == 200


def test_the_list_is_ordered_as_a_course_with_progress(site: Site) -> None:
    ada = site.account("ada@uni.example", "Ada")
    site.graded(ada.id, "ACCEPTED", 1.0, DUE, problem="remat_constant")
    site.sign_in("ada@uni.example")
    page = site.client.get("/").text
    assert (
        page.index("/problems/remat_sin_sin")
        < page.index("/problems/remat_constant")
        < page.index("/problems/sin_chain_recursive")
    )
    # out of the problems students are served (`ProblemRepository.serving`: published and not refused),
    # as the list shows them, not the folders on disk (an author's unpublished or refused one is no problem)
    served = {p.slug for p in site.services.problems.all(published_only=True)}
    listed = set(re.findall(r'<a href="/problems/([a-z0-9_]+)">', page))
    assert served and listed == served and "remat_constant" in served
    assert f"<strong>1 of {len(served)}</strong> solved" in page


def test_the_progress_counts_the_served_problems_not_the_folders(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    for slug in ("remat_sin_sin", "remat_constant", "sin_chain_recursive"):
        shutil.copytree(PROBLEMS / slug, root / slug, ignore=shutil.ignore_patterns("__pycache__"))
        mark_published(root / slug, content_version(root / slug))  # as they are now, whatever the tree holds
    mark_unpublished(root / "remat_constant")  # an author's draft
    repo = ProblemRepository(root)  # the snapshots of the published ones
    shutil.rmtree(root / VERSIONS / "sin_chain_recursive")  # refused: snapshot gone, folder edited
    statement = root / "sin_chain_recursive" / "statement.md"
    statement.write_text(statement.read_text() + "\n\nA DRAFT PARAGRAPH\n")
    site = Site(tmp_path)
    site.services.problems = repo
    site.account("ada@uni.example", "Ada")
    site.sign_in("ada@uni.example")
    page = site.client.get("/").text
    assert set(re.findall(r'<a href="/problems/([a-z0-9_]+)">', page)) == {"remat_sin_sin"}
    assert "<strong>0 of 1</strong> solved" in page


def test_a_favicon_is_linked_and_served(site: Site) -> None:
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in site.client.get("/").text
    for path in ("/favicon.ico", "/static/favicon.svg"):
        answer = site.client.get(path)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("image/svg+xml")
        assert answer.content.startswith(b"<svg")


def test_the_instructor_source_view_shows_code_as_code(site: Site) -> None:
    ada = site.account("ada@uni.example", "Ada")
    site.account("prof@uni.example", "Prof", SiteRole.ADMIN)
    source = "x = 1\n```\n</pre><script>alert(1)</script>\n# [bold]not markup[/]\n"
    record = site.services.submissions.create(problem="remat_sin_sin", source=source, user_id=ada.id)
    site.sign_in("ada@uni.example")
    assert site.client.get(f"/instructor/submissions/{record.id}/source").status_code == 403
    site.sign_in("prof@uni.example")
    page = site.client.get(f"/instructor/submissions/{record.id}/source")
    assert page.status_code == 200
    view = page.text.split('id="source-view">')[1].split("</div>\n")[0]
    assert "<script" not in view  # every character of the code is escaped
    code = view.split('<td class="code">')[1]
    assert html.unescape(re.sub(r"<[^>]+>", "", code)).strip() == source.strip()  # shown exactly, as text
    assert 'class="linenos"' in view  # line numbers
    assert "ada@uni.example" in page.text and 'href="/instructor/problems/remat_sin_sin"' in page.text
    rows = site.client.get("/instructor/problems/remat_sin_sin").text
    assert f'href="/instructor/submissions/{record.id}/source"' in rows


def test_instructors_see_counts_per_student(site: Site) -> None:
    from server.store.hints import HintStore, RevealReason

    ada, bob = site.account("ada@uni.example", "Ada"), site.account("bob@uni.example", "Bob")
    site.account("prof@uni.example", "Prof", SiteRole.ADMIN)
    for verdict, score in (("WRONG_POLICY", 0.0), ("WRONG_POLICY", 0.5), ("ACCEPTED", 1.0), ("ACCEPTED", 1.0)):
        site.graded(ada.id, verdict, score, DUE, problem="remat_sin_sin")
    site.graded(bob.id, "WRONG_VALUE", 0.0, DUE, problem="remat_sin_sin")
    HintStore(site.engine).reveal(bob.id, "remat_sin_sin", 1, RevealReason.REQUEST)
    site.sign_in("prof@uni.example")
    home = re.sub(r"\s+", " ", site.client.get("/instructor").text)
    assert 'remat_sin_sin</a></td> <td class="num">1 / 2</td>' in home  # 1 of 2 students solved it
    page = site.client.get("/instructor/problems/remat_sin_sin").text
    rows = [re.sub(r"<[^>]+>", " ", r) for r in page.split('id="students"')[1].split("</table>")[0].split("<tr>")[2:]]
    ada_row, bob_row = (" ".join(r.split()) for r in rows)
    assert ada_row.startswith("Ada ada@uni.example 4 1.00 2026-11-10 12:00 0")
    assert bob_row.startswith("Bob bob@uni.example 1 0.00 - 1")
    assert "2 tried, 1 solved" in page
