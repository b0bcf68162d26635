"""Class boards of a problem (`server.store.boards`): each student's best submission, ranked by
score, with the point its policy makes (bytes saved, FLOPs recomputed). For an open (budget)
problem, where scores are continuous, this is where a class sees how far its policies got.

- `GET /courses/{key}/board/{slug}`: the course's students and staff, and admins (`course.board`);
  students see each other's display names only when the course's staff show them
  (`Course.board_names`), else their own row named "you" and the others "a classmate"; links
  to submissions only where the viewer may read them. Never a source.
- `POST /instructor/courses/{key}/board`: the staff show or hide names (`course.edit`).
- `GET /instructor/problems/{slug}/board`: admins, every account's best (`submissions.all`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from server.authz import Action, CourseTarget, decide
from server.courses.course_pages import staffed_course
from server.courses.page_rendering import render_staff_page
from server.deps import ServicesDep
from server.store.boards import BoardEntry, BoardStore, ranked
from server.web.plane import Plane, class_plane
from server.web.rendering import require_action, require_teacher, require_user
from server.web.sessions import OptionalUser, PrincipalDep, check_csrf

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class BoardRow:
    """One row as the viewer sees it: `name` is the display name, "you" or "a classmate";
    `link` the submission's page when the viewer may read it, else None."""

    rank: int
    name: str
    mine: bool
    entry: BoardEntry
    link: str | None


def _plane(store: BoardStore, entries: list[BoardEntry], viewer_id: int) -> Plane | None:
    """The class's points (the viewer's marked), with the frontier of the best entry's verdict."""
    points = [
        (e.memory_bytes, e.recompute_flops, e.user_id == viewer_id)
        for e in entries
        if e.memory_bytes is not None and e.recompute_flops is not None
    ]
    frontier, budget = store.frontier(entries[0].submission_id) if entries else ([], None)
    return class_plane(points, frontier, budget)


def _rows(entries: list[BoardEntry], viewer_id: int, *, names: bool, staff: bool) -> list[BoardRow]:
    """Ranked rows (`ranked`), named for this viewer."""
    rows = []
    for rank, e in ranked(entries):
        mine = e.user_id == viewer_id
        name = e.display_name if names or staff else ("you" if mine else "a classmate")
        if mine and (names or staff):
            name += " (you)"
        rows.append(BoardRow(rank, name, mine, e, f"/submissions/{e.submission_id}" if mine or staff else None))
    return rows


@router.get("/courses/{key}/board/{slug}", response_class=HTMLResponse)
def course_board(
    key: str, slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """A course's board of one of its assignments; 404 for anyone not in the course (course keys
    are not announced) and for a problem the course does not assign."""
    user = require_user(user, request)
    course = services.courses.get(key)
    if course is None or not decide(principal, Action.COURSE_BOARD, CourseTarget.of(course)):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such course")
    if slug not in {a.problem for a in services.courses.assignments(course.id)}:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "the course has no such assignment")
    assert services.engine is not None
    staff = decide(principal, Action.COURSE_VIEW, CourseTarget.of(course))
    store = BoardStore(services.engine)
    entries = store.board(slug, course.id)
    rows = _rows(entries, user.id, names=course.board_names, staff=staff)
    plane = _plane(store, entries, user.id)
    return render_staff_page(
        request, "board.html", user, slug=slug, course=course, rows=rows, staff=staff, plane=plane,
        peak=any(e.peak for e in entries),
    )  # fmt: skip


@router.post("/instructor/courses/{key}/board", response_class=HTMLResponse)
def course_board_names(
    key: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    board_names: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Whether the course's boards show students each other's display names (its staff decide)."""
    require_teacher(user, principal, request)
    check_csrf(request, csrf_token)
    course = staffed_course(services, key, principal, Action.COURSE_EDIT)
    assert services.engine is not None
    BoardStore(services.engine).set_board_names(course.id, board_names == "on")
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/instructor/problems/{slug}/board", response_class=HTMLResponse)
def problem_board(
    slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """For admins: every account's best submission of a problem."""
    user = require_action(user, principal, request, Action.SUBMISSIONS_ALL)
    assert services.engine is not None
    store = BoardStore(services.engine)
    entries = store.board(slug)
    rows = _rows(entries, user.id, names=True, staff=True)
    plane = _plane(store, entries, user.id)
    return render_staff_page(
        request, "board.html", user, slug=slug, course=None, rows=rows, staff=True, plane=plane,
        peak=any(e.peak for e in entries),
    )  # fmt: skip
