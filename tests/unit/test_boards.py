"""Class boards (`server.courses.board_pages`, `server.store.boards`), fast: FastAPI's TestClient on
real SQLite. A course's board lists its own students' best submissions, ranked by score, names
hidden from students unless the staff show them; never another course's student, never a source."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from server.store.accounts import SiteRole
from server.store.submissions import SubmissionRecord, SubmissionStore
from tests.unit.test_course_pages import Site

SLUG = "checkpoint_dot_policy"
AT = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SECRET_SOURCE = "def f(x):  # ada's secret solution"


def graded(
    site: Site,
    user_id: int,
    score: float,
    nbytes: int,
    flops: int,
    minutes: int,
    peak: int | None = None,
    optimum: int | None = None,
) -> str:
    """A submission graded as a worker stores it, with a residual report's point (and with `peak`,
    the report of a budget on the backward pass's peak)."""
    store = SubmissionStore(site.engine)
    record = store.create(problem=SLUG, source=SECRET_SOURCE, user_id=user_id)
    assert store.claim(record.id, worker_id="w", lease_s=60, max_attempts=3).record is not None
    report = {
        "residuals": {
            "submitted_bytes": nbytes,
            "submitted_recompute_flops": flops,
            "budget_bytes": 640_000,
            "frontier": [{"bytes": 638_976, "flops": 8_454_144}, {"bytes": 573_440, "flops": 17_907_712}],
        }
    }
    if optimum is not None:
        report["residuals"]["optimum"] = {"bytes": 638_976, "flops": optimum, "optimal": True}
    if peak is not None:
        report["residuals"].update(budget_of="peak", submitted_bwd_peak_bytes=peak, budget_bytes=1_200_000)
    verdict = "ACCEPTED" if score > 0.67 else "WRONG_POLICY"
    assert store.finish(
        record.id, verdict=verdict, score=score, problem_version="v0", result_json=json.dumps(report), worker_id="w"
    )
    with site.engine.begin() as connection:
        at = AT + timedelta(minutes=minutes)
        connection.execute(update(SubmissionRecord).where(SubmissionRecord.id == record.id).values(created_at=at))
    return record.id


def rows(page: str) -> list[str]:
    """The board's rows as 'rank|student|score' (tags stripped)."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    out = []
    for row in re.findall(r"<tr.*?</tr>", body, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        out.append("|".join(cells[:3]))
    return out


@pytest.fixture
def course(tmp_path):  # type: ignore[no-untyped-def]
    site = Site(tmp_path)
    site.account("prof@uni.example", "Prof", SiteRole.ADMIN)
    people = {n: site.account(f"{n}@uni.example", n.title()) for n in ("ada", "bob", "cy", "sam")}
    csrf = site.sign_in("prof@uni.example")
    for key in ("rm-101", "other"):
        site.client.post("/instructor/courses", data={"key": key, "title": key, "csrf_token": csrf})
        site.client.post(f"/instructor/courses/{key}/assignments", data={"problem": SLUG, "csrf_token": csrf})
    for name, key, role in (("ada", "rm-101", "student"), ("bob", "rm-101", "student"), ("sam", "rm-101", "staff"),
                            ("cy", "other", "student")):  # fmt: skip
        answer = site.client.post(
            f"/instructor/courses/{key}/enrollments",
            data={"email": f"{name}@uni.example", "role": role, "csrf_token": csrf},
            follow_redirects=False,
        )
        assert answer.status_code == 303, answer.text
    graded(site, people["ada"].id, 0.67, 900_000, 0, 0)  # over the budget first
    graded(site, people["ada"].id, 0.92, 606_208, 16_859_136, 5)
    graded(site, people["bob"].id, 1.0, 638_976, 8_470_528, 10)
    graded(site, people["bob"].id, 1.0, 638_976, 8_470_528, 20)  # the same score later: not his best
    graded(site, people["cy"].id, 1.0, 638_976, 8_470_528, 1)  # another course
    site.client.post("/signout", data={"csrf_token": site.csrf()})
    return site, people


def test_a_student_sees_the_ranking_with_names_hidden_and_never_a_source(course) -> None:  # type: ignore[no-untyped-def]
    site, _ = course
    site.sign_in("ada@uni.example")
    page = site.client.get(f"/courses/rm-101/board/{SLUG}")
    assert page.status_code == 200
    assert rows(page.text) == ["1|a classmate|1.0000", "2|you|0.9200"]
    assert "Bob" not in page.text and "Cy" not in page.text and SECRET_SOURCE not in page.text
    assert "592.0 KiB" in page.text and "16.9 M" in page.text  # her best point, not her first
    assert page.text.count('href="/submissions/') == 1  # her own row only
    plane = page.text.split('id="class-plane"', 1)[1].split("</figure>", 1)[0]
    assert plane.count("data-point=") == 2 and plane.count('data-point="yours"') == 1  # two students, hers marked
    assert 'class="frontier"' in plane and 'class="budget"' in plane
    assert site.client.get(f"/courses/other/board/{SLUG}").status_code == 404  # not her course
    assert site.client.get("/courses/rm-101/board/remat_sin_sin").status_code == 404  # not an assignment


def test_the_staff_show_names_and_admins_see_everyone(course) -> None:  # type: ignore[no-untyped-def]
    site, _ = course
    csrf = site.sign_in("sam@uni.example")
    staff_view = site.client.get(f"/courses/rm-101/board/{SLUG}").text
    assert rows(staff_view) == ["1|Bob|1.0000", "2|Ada|0.9200"]  # staff see names; Cy is another course's
    answer = site.client.post(
        "/instructor/courses/rm-101/board", data={"board_names": "on", "csrf_token": csrf}, follow_redirects=False
    )
    assert answer.status_code == 303
    site.client.post("/signout", data={"csrf_token": site.csrf()})
    site.sign_in("ada@uni.example")
    assert rows(site.client.get(f"/courses/rm-101/board/{SLUG}").text) == ["1|Bob|1.0000", "2|Ada (you)|0.9200"]
    assert site.client.get(f"/instructor/problems/{SLUG}/board").status_code == 403
    site.client.post("/signout", data={"csrf_token": site.csrf()})
    site.sign_in("prof@uni.example")
    everyone = rows(site.client.get(f"/instructor/problems/{SLUG}/board").text)
    assert everyone == ["1|Cy|1.0000", "1|Bob|1.0000", "3|Ada|0.9200"]  # equal scores share a rank


def test_a_student_cannot_change_the_setting(course) -> None:  # type: ignore[no-untyped-def]
    site, _ = course
    csrf = site.sign_in("ada@uni.example")
    answer = site.client.post(
        "/instructor/courses/rm-101/board", data={"board_names": "on", "csrf_token": csrf}, follow_redirects=False
    )
    assert answer.status_code == 403


def test_a_board_of_a_peak_budget_shows_each_students_peak(course) -> None:  # type: ignore[no-untyped-def]
    site, people = course
    graded(site, people["sam"].id, 1.0, 950_272, 8_462_336, 30, peak=1_163_268)
    site.sign_in("prof@uni.example")
    page = site.client.get(f"/instructor/problems/{SLUG}/board").text
    assert '<th scope="col" class="num">Peak</th>' in page and "backward pass peak bytes" in page
    assert 'title="1,163,268 bytes"' in page  # the point is the peak, not the 950,272 bytes of residuals
    assert 'title="950,272 bytes"' not in page


def test_equal_scores_rank_by_recomputation_and_a_program_beyond_the_optimum_is_named(course) -> None:  # type: ignore[no-untyped-def]
    """The grade is capped at 1, so policies that both reach it are ranked by what they recompute;
    one that recomputes less than the judge's optimum (a rewrite the optimum does not cover) is
    marked, and its staff see it listed."""
    site, people = course
    graded(site, people["ada"].id, 1.0, 638_976, 9_000_000, 30, optimum=8_454_144)  # within, recomputes more
    graded(site, people["ada"].id, 1.0, 630_000, 8_998_912, 40, optimum=8_454_144)  # her best: less, later
    graded(site, people["bob"].id, 1.0, 600_000, 4_000_000, 50, optimum=8_454_144)  # beyond the optimum
    csrf = site.sign_in("sam@uni.example")
    page = site.client.get(f"/courses/rm-101/board/{SLUG}").text
    assert rows(page) == ["1|Bob|1.0000", "2|Ada|1.0000"]  # no shared rank: Bob recomputes less
    assert 'title="8,998,912 FLOPs"' in page and 'title="9,000,000 FLOPs"' not in page  # Ada's least
    beyond = page.split('id="board-beyond"', 1)[1].split("</section>", 1)[0]
    assert "1 submission recomputes less than the judge's optimum" in beyond
    assert "Bob" in beyond and "recomputes 4,000,000 FLOPs, the optimum 8,454,144" in beyond and "Ada" not in beyond
    assert page.count("beyond the optimum</span>") == 1
    site.client.post("/signout", data={"csrf_token": csrf})
    site.sign_in("ada@uni.example")
    student = site.client.get(f"/courses/rm-101/board/{SLUG}").text
    assert 'id="board-beyond"' in student and "4,000,000 FLOPs, the optimum" not in student  # no list for students
