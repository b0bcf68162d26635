"""Course and regrade pages, for a course's staff and for admins (`server.authz`: others get
303 to sign in, 404 for a course they do not teach, 403 for an action their role lacks); every
form carries the session's CSRF token. The same operations as `remat-judge courses ...` and
`remat-judge problems regrade` (`server.courses.admin`).

- `GET /instructor/courses`: the courses a user teaches (every course for an admin), and for
  admins a form to make one;
- `GET /instructor/courses/{key}`: its assignments (a form each to change dates and rules), a
  form to add one, the gradebook (students x assignments: score, attempts, solved time, late),
  extensions and enrollment forms; `GET .../gradebook.csv` exports it;
- `POST /instructor/courses/{key}/settings`: whether solutions open after deadlines (admins);
- the roster sync button of an LMS course posts to `server.lti.roster_pages` (LTI uses courses,
  never the reverse), which answers with this page (`render_course_page`);
- the regrade pages (`server.courses.regrade_pages`, whose router this one includes):
  `POST /instructor/problems/{slug}/regrade`: starts a regrade and opens its page,
  `GET /instructor/regrades/{id}`: progress and changed verdicts (refreshes while unfinished).
  Regrades are for admins: they follow a new problem version, which only an admin publishes, and
  re-grade every course's submissions of the problem.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from graders.problems.spec import ProblemError
from server.authz import Action, CourseTarget, Principal, decide
from server.courses import admin, regrade_pages
from server.courses.gradebook import gradebook
from server.courses.page_rendering import render_staff_page
from server.deps import ServicesDep
from server.problems.clusters import insight, versions
from server.services import Services
from server.store.accounts import UserRecord
from server.store.courses import Course, CourseError, CourseRole, GradeRule, LateRule, Policy
from server.web.rendering import require_action, require_teacher
from server.web.sessions import OptionalUser, PrincipalDep, check_csrf

router = APIRouter(include_in_schema=False)


def staffed_course(services: Services, key: str, principal: Principal, action: Action = Action.COURSE_VIEW) -> Course:
    """The course `key`, when `principal` may do `action` to it: 404 when there is none or they
    may not even view it (course keys are not announced), 403 when they may view it only."""
    course = services.courses.get(key)
    target = CourseTarget.of(course) if course is not None else None
    if course is None or target is None or not decide(principal, Action.COURSE_VIEW, target):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such course")
    if not decide(principal, action, target):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "your role in this course does not allow that"
            + (": an LMS course's students come from the LMS" if action == Action.COURSE_ENROLL else ""),
        )
    return course


def render_course_page(
    request: Request,
    services: Services,
    user: UserRecord,
    principal: Principal,
    course: Course,
    *,
    status_code: int = 200,
    error: str | None = None,
    notice: str | None = None,
) -> HTMLResponse:
    store = services.courses
    book = gradebook(store, course)
    assigned = {a.problem for a in book.assignments}
    undelivered = services.lms_grades.undelivered(course)
    target = CourseTarget.of(course)
    published_only = not decide(principal, Action.PROBLEMS_MANAGE)
    return render_staff_page(
        request,
        "course.html",
        user,
        status_code=status_code,
        course=course,
        book=book,
        unassigned=[p for p in services.problems.all(published_only=published_only) if p.slug not in assigned],
        instructors=store.members(course.id, role=None),
        error=error,
        notice=notice,
        unpublished={a.problem for a in book.assignments if not services.problems.is_published(a.problem)},
        late_rules=list(LateRule),
        grade_rules=list(GradeRule),
        may_enroll=decide(principal, Action.COURSE_ENROLL, target),
        may_configure=decide(principal, Action.COURSE_SETTINGS, target),
        may_sync=course.from_lms and decide(principal, Action.COURSE_ROSTER, target),
        course_roles=list(CourseRole),
        undelivered=undelivered,
        undelivered_reasons=sorted({reason for _, reason in undelivered.values()}),
    )


@router.get("/instructor/courses", response_class=HTMLResponse)
def courses(request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep) -> HTMLResponse:
    """The courses this user teaches (every course, for an admin)."""
    user = require_teacher(user, principal, request)
    store = services.courses
    return render_staff_page(
        request,
        "courses.html",
        user,
        courses=store.all() if principal.admin else store.staffed_by(user.id),
        may_create=decide(principal, Action.COURSES_CREATE),
    )


@router.post("/instructor/courses", response_class=HTMLResponse)
def create_course(
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    key: Annotated[str, Form()] = "",
    title: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    user = require_action(user, principal, request, Action.COURSES_CREATE)
    check_csrf(request, csrf_token)
    store = services.courses
    try:
        course = store.create(key.strip(), title)
    except CourseError as exc:
        return render_staff_page(
            request,
            "courses.html",
            user,
            courses=store.all(),
            error=str(exc),
            may_create=True,
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/instructor/courses/{key}", response_class=HTMLResponse)
def course_page(
    key: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    user = require_teacher(user, principal, request)
    return render_course_page(request, services, user, principal, staffed_course(services, key, principal))


@router.get("/instructor/courses/{key}/gradebook.csv")
def gradebook_csv(
    key: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> Response:
    require_teacher(user, principal, request)
    course = staffed_course(services, key, principal)
    text = gradebook(services.courses, course).csv()
    return Response(
        text,
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{course.key}-gradebook.csv"',
            "Cache-Control": "no-store",
        },
    )


@router.post("/instructor/courses/{key}/assignments", response_class=HTMLResponse)
def set_assignment(
    key: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    problem: Annotated[str, Form()] = "",
    opens_at: Annotated[str, Form()] = "",
    due_at: Annotated[str, Form()] = "",
    late_rule: Annotated[str, Form()] = "penalty",
    penalty_per_day: Annotated[str, Form()] = "0",
    penalty_cap: Annotated[str, Form()] = "1",
    grade_rule: Annotated[str, Form()] = "best",
    grace_minutes: Annotated[str, Form()] = "0",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Adds or changes an assignment. Penalties are entered in percent (10 = 10% per day), the
    grace period in whole minutes."""
    user = require_teacher(user, principal, request)
    check_csrf(request, csrf_token)
    course = staffed_course(services, key, principal, Action.COURSE_EDIT)
    try:
        if not decide(principal, Action.PROBLEMS_MANAGE) and not services.problems.is_published(problem):
            raise CourseError(f"the judge has no published problem {problem!r}")
        try:
            per_day, cap = float(penalty_per_day or 0) / 100, float(penalty_cap or 100) / 100
        except ValueError:
            raise CourseError("penalties are numbers of percent (0-100)") from None
        try:
            grace = int(grace_minutes.strip() or 0)
        except ValueError:
            raise CourseError("the grace period is a whole number of minutes (0-1440)") from None
        try:
            late, rule = LateRule(late_rule), GradeRule(grade_rule)
        except ValueError:
            raise CourseError("late rule: none or penalty; grade rule: best or last") from None
        policy = Policy(
            opens_at=admin.parse_time(opens_at, "opening time"),
            due_at=admin.parse_time(due_at, "deadline"),
            late_rule=late,
            penalty_per_day=per_day,
            penalty_cap=cap,
            grade_rule=rule,
            grace_minutes=grace,
        )
        admin.change_assignment(services.courses, course, problem, policy, services.problems, services.lms_grades)
    except (CourseError, ValueError) as exc:
        return render_course_page(
            request,
            services,
            user,
            principal,
            course,
            error=str(exc),
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/instructor/courses/{key}/extensions", response_class=HTMLResponse)
def add_extension(
    key: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    problem: Annotated[str, Form()] = "",
    email: Annotated[str, Form()] = "",
    due_at: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    user = require_teacher(user, principal, request)
    check_csrf(request, csrf_token)
    course = staffed_course(services, key, principal, Action.COURSE_EDIT)
    try:
        when = admin.parse_time(due_at, "extension")
        if when is None:
            raise CourseError("give the student's deadline")
        admin.extend(services.courses, course, problem, email.strip(), when, services.lms_grades)
    except CourseError as exc:
        return render_course_page(
            request,
            services,
            user,
            principal,
            course,
            error=str(exc),
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/instructor/courses/{key}/enrollments", response_class=HTMLResponse)
def add_enrollment(
    key: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    email: Annotated[str, Form()] = "",
    role: Annotated[str, Form()] = "student",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Enrolls an account by email: admins, and the staff of a course an admin made (an LMS
    course's roster comes from its launches)."""
    user = require_teacher(user, principal, request)
    check_csrf(request, csrf_token)
    course = staffed_course(services, key, principal, Action.COURSE_ENROLL)
    try:
        admin.enroll(services.courses, services.users, course, email.strip(), role)
    except CourseError as exc:
        return render_course_page(
            request,
            services,
            user,
            principal,
            course,
            error=str(exc),
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/instructor/courses/{key}/settings", response_class=HTMLResponse)
def course_settings(
    key: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    solutions_after_deadline: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Whether the course's students see the reference solution once their deadline has passed
    (admins only: see `Course.solutions_after_deadline`)."""
    require_teacher(user, principal, request)
    check_csrf(request, csrf_token)
    course = staffed_course(services, key, principal, Action.COURSE_SETTINGS)
    services.courses.set_solutions_after_deadline(course.id, solutions_after_deadline == "on")
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/instructor/courses/{key}/peers", response_class=HTMLResponse)
def course_peers(
    key: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    peer_insight: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Whether the course's students see how many others made the same mistake and fixed it
    (the course's staff decide: `Course.peer_insight`)."""
    require_teacher(user, principal, request)
    check_csrf(request, csrf_token)
    course = staffed_course(services, key, principal, Action.COURSE_EDIT)
    services.courses.set_peer_insight(course.id, peer_insight == "on")
    return RedirectResponse(f"/instructor/courses/{course.key}", status_code=status.HTTP_303_SEE_OTHER)


def _insight_page(
    request: Request, services: Services, user: UserRecord, slug: str, version: str | None, course: Course | None
) -> HTMLResponse:
    known = versions(services.engine, slug)
    if version is not None and version not in known:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no graded submissions of that version")
    if version is None:
        try:
            published = services.problems.get(slug).version
        except (KeyError, ProblemError):
            published = None
        version = published if published in known else next(iter(known), None)
    found = insight(services.engine, slug, version=version, course=course)
    return render_staff_page(request, "insight.html", user, slug=slug, found=found, versions=known, course=course)


@router.get("/instructor/courses/{key}/insight/{slug}", response_class=HTMLResponse)
def course_insight(
    key: str,
    slug: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    version: str | None = None,
) -> HTMLResponse:
    """For the course's staff: the policies the course's students made on one of its problems,
    and identical programs among them (`server.problems.clusters`)."""
    user = require_teacher(user, principal, request)
    course = staffed_course(services, key, principal)
    if slug not in {a.problem for a in services.courses.assignments(course.id)}:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "the course has no such assignment")
    return _insight_page(request, services, user, slug, version, course)


@router.get("/instructor/problems/{slug}/insight", response_class=HTMLResponse)
def problem_insight(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    version: str | None = None,
) -> HTMLResponse:
    """For admins: the policies every submitter made on a problem, and identical programs."""
    user = require_action(user, principal, request, Action.SUBMISSIONS_ALL)
    return _insight_page(request, services, user, slug, version, None)


router.include_router(regrade_pages.router)  # after the course pages, as before
