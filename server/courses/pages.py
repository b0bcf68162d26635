"""Instructor pages for courses and regrades (issue 12, items 5 and 6). Instructors only (others:
303 to sign in, or 403); every form carries the session's CSRF token. The same operations as
`remat-judge courses ...` and `remat-judge problems regrade` (`server.courses.admin`).

- `GET /instructor/courses`: the courses, and a form to make one;
- `GET /instructor/courses/{key}`: its assignments (a form each to change dates and rules), a
  form to add one, the gradebook (students x assignments: score, attempts, solved time, late),
  extensions and enrollment forms; `GET .../gradebook.csv` exports it;
- `POST /instructor/problems/{slug}/regrade`: starts a regrade and opens its page,
  `GET /instructor/regrades/{id}`: progress and changed verdicts (refreshes while unfinished).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.engine import Engine

from server.api.deps import Services, get_services
from server.courses import admin
from server.courses.models import Course, CourseError, CourseStore
from server.courses.regrade import RegradeStore
from server.courses.rules import GradeRule, LateRule, Policy
from server.db import UserRecord
from server.web.auth import OptionalUser, check_csrf, csrf_token
from server.web.pages import WEB_DIR, _require_user
from server.web.panel import FILTERS

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=[str(HERE / "templates"), str(WEB_DIR / "templates")])
templates.env.filters.update(FILTERS)
router = APIRouter(include_in_schema=False)
ServicesDep = Annotated[Services, Depends(get_services)]


def _render(request: Request, name: str, user: UserRecord, status_code: int = 200, **context: Any) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, {
        "user": user, "csrf": csrf_token(request), "bundle": (WEB_DIR / "static" / "dist" / "app.js").exists(),
        **context}, status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    return response


def _instructor(user: UserRecord | None, request: Request) -> UserRecord:
    user = _require_user(user, request)
    if user.role != "instructor":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "instructors only")
    return user


def _engine(services: Services) -> Engine:
    assert services.engine is not None
    return services.engine


def _course(services: Services, key: str) -> Course:
    course = CourseStore(_engine(services)).get(key)
    if course is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no course {key!r}")
    return course


def _course_page(request: Request, services: Services, user: UserRecord, course: Course, *,
                 status_code: int = 200, error: str | None = None, notice: str | None = None) -> HTMLResponse:
    store = CourseStore(_engine(services))
    book = store.gradebook(course)
    assigned = {a.problem for a in book.assignments}
    return _render(request, "course.html", user, status_code=status_code, course=course, book=book,
                   unassigned=[p for p in services.problems.all() if p.slug not in assigned],
                   instructors=store.members(course.id, role=None), error=error, notice=notice,
                   unpublished={a.problem for a in book.assignments if not services.problems.is_published(a.problem)},
                   late_rules=list(LateRule), grade_rules=list(GradeRule))


@router.get("/instructor/courses", response_class=HTMLResponse)
def courses(request: Request, services: ServicesDep, user: OptionalUser) -> HTMLResponse:
    user = _instructor(user, request)
    return _render(request, "courses.html", user, courses=CourseStore(_engine(services)).all())


@router.post("/instructor/courses", response_class=HTMLResponse)
def create_course(request: Request, services: ServicesDep, user: OptionalUser, key: Annotated[str, Form()] = "",
                  title: Annotated[str, Form()] = "", csrf_token: Annotated[str, Form()] = "") -> Response:
    user = _instructor(user, request)
    check_csrf(request, csrf_token)
    store = CourseStore(_engine(services))
    try:
        course = store.create(key.strip(), title)
    except CourseError as exc:
        return _render(request, "courses.html", user, courses=store.all(), error=str(exc),
                       status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/instructor/courses/{key}", response_class=HTMLResponse)
def course_page(key: str, request: Request, services: ServicesDep, user: OptionalUser) -> HTMLResponse:
    user = _instructor(user, request)
    return _course_page(request, services, user, _course(services, key))


@router.get("/instructor/courses/{key}/gradebook.csv")
def gradebook_csv(key: str, request: Request, services: ServicesDep, user: OptionalUser) -> Response:
    _instructor(user, request)
    course = _course(services, key)
    text = CourseStore(_engine(services)).gradebook(course).csv()
    return Response(text, media_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="{course.key}-gradebook.csv"', "Cache-Control": "no-store"})


@router.post("/instructor/courses/{key}/assignments", response_class=HTMLResponse)
def set_assignment(key: str, request: Request, services: ServicesDep, user: OptionalUser,
                   problem: Annotated[str, Form()] = "", opens_at: Annotated[str, Form()] = "",
                   due_at: Annotated[str, Form()] = "", late_rule: Annotated[str, Form()] = "penalty",
                   penalty_per_day: Annotated[str, Form()] = "0", penalty_cap: Annotated[str, Form()] = "1",
                   grade_rule: Annotated[str, Form()] = "best", csrf_token: Annotated[str, Form()] = "") -> Response:
    """Adds or changes an assignment. Penalties are entered in percent (10 = 10% per day)."""
    user = _instructor(user, request)
    check_csrf(request, csrf_token)
    course = _course(services, key)
    try:
        try:
            per_day, cap = float(penalty_per_day or 0) / 100, float(penalty_cap or 100) / 100
        except ValueError:
            raise CourseError("penalties are numbers of percent (0-100)") from None
        try:
            late, rule = LateRule(late_rule), GradeRule(grade_rule)
        except ValueError:
            raise CourseError("late rule: none or penalty; grade rule: best or last") from None
        policy = Policy(opens_at=admin.parse_time(opens_at, "opening time"), due_at=admin.parse_time(due_at, "deadline"),
                        late_rule=late, penalty_per_day=per_day, penalty_cap=cap, grade_rule=rule)
        admin.change_assignment(_engine(services), course, problem, policy, services.problems)
    except (CourseError, ValueError) as exc:
        return _course_page(request, services, user, course, error=str(exc),
                            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/instructor/courses/{key}/extensions", response_class=HTMLResponse)
def add_extension(key: str, request: Request, services: ServicesDep, user: OptionalUser,
                  problem: Annotated[str, Form()] = "", email: Annotated[str, Form()] = "",
                  due_at: Annotated[str, Form()] = "", csrf_token: Annotated[str, Form()] = "") -> Response:
    user = _instructor(user, request)
    check_csrf(request, csrf_token)
    course = _course(services, key)
    try:
        when = admin.parse_time(due_at, "extension")
        if when is None:
            raise CourseError("give the student's deadline")
        admin.extend(_engine(services), course, problem, email.strip(), when)
    except CourseError as exc:
        return _course_page(request, services, user, course, error=str(exc),
                            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/instructor/courses/{key}/enrollments", response_class=HTMLResponse)
def add_enrollment(key: str, request: Request, services: ServicesDep, user: OptionalUser,
                   email: Annotated[str, Form()] = "", role: Annotated[str, Form()] = "student",
                   csrf_token: Annotated[str, Form()] = "") -> Response:
    user = _instructor(user, request)
    check_csrf(request, csrf_token)
    course = _course(services, key)
    try:
        admin.enroll(_engine(services), course, email.strip(), role)
    except CourseError as exc:
        return _course_page(request, services, user, course, error=str(exc),
                            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/instructor/problems/{slug}/regrade")
def start_regrade(slug: str, request: Request, services: ServicesDep, user: OptionalUser,
                  csrf_token: Annotated[str, Form()] = "") -> Response:
    user = _instructor(user, request)
    check_csrf(request, csrf_token)
    try:
        regrade = admin.start_regrade(_engine(services), services.problems, slug, requested_by=user.email)
    except CourseError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    if services.pool is not None:  # embedded mode: enqueue now rather than at the next sweep
        services.pool.sweeper.sweep(everything=False)
    return RedirectResponse(f"/instructor/regrades/{regrade.id}", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/instructor/regrades/{regrade_id}", response_class=HTMLResponse)
def regrade_page(regrade_id: int, request: Request, services: ServicesDep, user: OptionalUser) -> HTMLResponse:
    user = _instructor(user, request)
    progress = RegradeStore(_engine(services)).progress(regrade_id)
    if progress is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no regrade #{regrade_id}")
    return _render(request, "regrade.html", user, progress=progress)
