"""The student's pages: the problem list in course order, a problem with its hints and history,
submitting, live verdicts, a past submission and its source, and the reference solution after a
first ACCEPTED. Server-rendered (Jinja2, `server.web.rendering`); the JavaScript bundle (web/) only
enhances them. Accounts: `server.web.account_pages`; instructors: `server.web.instructor_pages`."""

from __future__ import annotations

import ast
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from graders.problems.problem import Problem
from server.authz import Action, decide
from server.deps import ServicesDep
from server.problems.clusters import peers_who_fixed
from server.services import Services
from server.store.accounts import UserRecord
from server.store.db import utcnow
from server.store.submissions import SubmissionRecord
from server.submissions.http_refusals import submit_error
from server.submissions.submit import SubmitError
from server.submissions.submit import submit as submit_service
from server.web.hint_opening import hint_view, request_next
from server.web.markdown import render_markdown, split_section
from server.web.panel import panel_context
from server.web.rendering import render, report_of, require_user, visible_problem, visible_submission
from server.web.sessions import (
    OptionalUser,
    PrincipalDep,
    check_csrf,
)

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def problem_list(request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep) -> HTMLResponse:
    solved = services.reports.solved(user.id) if user else set()
    problems = sorted(
        services.problems.all(published_only=not decide(principal, Action.PROBLEMS_MANAGE)), key=course_order
    )
    unpublished = {p.slug for p in problems if not services.problems.is_published(p.slug)}
    return render(
        request,
        "problems.html",
        user,
        problems=problems,
        solved=solved,
        unpublished=unpublished,
        solved_here=len(solved & {p.slug for p in problems}),
    )


def course_order(problem: Problem) -> tuple[int, int, str]:
    """Where a problem sits in the list: its `order` in problem.toml (lowest first; problems
    without one after those with one), then difficulty (easy, medium, hard), then title."""
    difficulty = {"easy": 0, "medium": 1, "hard": 2}[problem.spec.difficulty]
    return (problem.spec.order if problem.spec.order is not None else 100_001, difficulty, problem.spec.title)


@router.get("/problems/{slug}", response_class=HTMLResponse)
def problem_page(
    slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    problem = visible_problem(services, slug, principal)
    mine = services.reports.for_user(user.id, problem=slug, limit=20) if user else []
    solved = user is not None and (
        decide(principal, Action.PROBLEMS_MANAGE) or slug in services.reports.solved(user.id)
    )
    dues = []
    if user is not None:
        dues = services.courses.due_dates_for(user.id, slug)
    hints = None
    if user is not None:
        hints = hint_view(
            services.hints, user_id=user.id, problem=slug, text=problem.read_text("hints.md") or "", everything=solved
        )
    task, rest = split_section(problem.statement, "The task")  # the task first, then the explanations
    return render(
        request,
        "problem.html",
        user,
        problem=problem,
        statement=render_markdown(rest),
        task=render_markdown(task) if task else "",
        starter=problem.starter,
        mine=mine,
        solved=solved,
        dues=dues,
        hints=hints,
        solution_open=solved or _past_deadline(dues),
        draft_key=f"remat-draft:{user.id if user else 'anon'}:{slug}",
    )


def _past_deadline(dues: list) -> bool:
    """Whether a deadline of the user's assignments of this problem (their extension, when they
    have one) has passed in a course that opens solutions after deadlines (an admin's choice:
    `Course.solutions_after_deadline`): the reference solution opens then, as after an ACCEPTED."""
    now = utcnow()
    return any(
        course.solutions_after_deadline
        and (extension or assignment.due_at) is not None
        and (extension or assignment.due_at) <= now
        for course, assignment, extension in dues
    )


@router.post("/problems/{slug}/hints")
def next_hint(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    number: Annotated[int, Form(ge=0, le=10_000)] = 0,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Opens the next hint on request (recorded for instructors), then back to the problem's hints."""
    user = require_user(user, request)
    check_csrf(request, csrf_token)
    problem = visible_problem(services, slug, principal)

    request_next(services.hints, user_id=user.id, problem=slug, text=problem.read_text("hints.md") or "", number=number)
    return RedirectResponse(f"/problems/{slug}#hints", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/problems/{slug}/submit")
def submit(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    source: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Stores and queues a submission from the problem page. JSON for the page's script
    (`Accept: application/json`), else a redirect to the submission's page."""
    wants_json = "application/json" in request.headers.get("accept", "")
    if user is None:
        if wants_json:
            return JSONResponse({"detail": "sign in to submit"}, status_code=status.HTTP_401_UNAUTHORIZED)
        return RedirectResponse(
            "/signin?" + urlencode({"next": f"/problems/{slug}"}), status_code=status.HTTP_303_SEE_OTHER
        )
    check_csrf(request, csrf_token)
    problem = visible_problem(services, slug, principal)
    source = source.replace("\r\n", "\n")  # forms send textareas with CRLF line endings
    try:
        record = submit_service(
            services,
            problem=problem.slug,
            source=source,
            owner_key=f"user:{user.id}",
            user_id=user.id,
            unpublished_too=decide(principal, Action.PROBLEMS_MANAGE),
        )
    except SubmitError as exc:
        refused = submit_error(exc)  # the same status and words as the API's
        if wants_json:
            return JSONResponse({"detail": refused.detail}, status_code=refused.status_code, headers=refused.headers)
        raise refused from None
    if wants_json:
        return JSONResponse(
            {
                "id": record.id,
                "status": str(record.status),
                "status_url": f"/submissions/{record.id}/status",
                "panel_url": f"/submissions/{record.id}/panel",
                "page_url": f"/submissions/{record.id}",
            },
            status_code=status.HTTP_201_CREATED,
        )
    return RedirectResponse(f"/submissions/{record.id}", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/problems/{slug}/solution", response_class=HTMLResponse)
def solution(
    slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """The reference solution: after the user's first ACCEPTED, or once the deadline of one of
    their assignments of the problem has passed in a course that opens solutions then (admins
    always; course staff like anyone else, since whoever can make an LMS course is staff of it).
    Hints are on the problem page."""
    user = require_user(user, request)
    problem = visible_problem(services, slug, principal)
    if not decide(principal, Action.PROBLEMS_MANAGE) and slug not in services.reports.solved(user.id):
        dues = services.courses.due_dates_for(user.id, slug)
        if not _past_deadline(dues):
            return render(request, "locked.html", user, problem=problem, status_code=status.HTTP_403_FORBIDDEN)
    reference = without_module_docstring(problem.reference_path.read_text(encoding="utf-8"))
    return render(
        request, "solution.html", user, problem=problem, reference=render_markdown(f"````python\n{reference}\n````")
    )


def without_module_docstring(source: str) -> str:
    """`source` without its module docstring (a reference's note to instructors, such as "never
    served"), or unchanged when it has none or does not parse."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        lines = source.splitlines(keepends=True)
        return "".join(lines[body[0].end_lineno :]).lstrip("\n")
    return source


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission_page(
    submission_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    user = require_user(user, request)
    record = visible_submission(services, submission_id, principal)
    report = report_of(record)
    context = panel_context(report) if report else {}
    return render(
        request,
        "submission.html",
        user,
        record=record,
        pending=report is None,
        peers_fixed=_peers_fixed(services, record, user),
        **context,
    )


def _peers_fixed(services: Services, record: SubmissionRecord, viewer: UserRecord | None) -> int:
    """For the submission's own author, how many others in their courses (those with peer
    insight on) made the same policy mistake and later got ACCEPTED (`server.problems.clusters`)."""
    if (
        viewer is None
        or record.user_id != viewer.id
        or record.policy_fingerprint is None
        or record.verdict in (None, "ACCEPTED")
        or services.engine is None
    ):
        return 0

    courses = services.courses.peer_insight_courses(viewer.id, record.problem)
    return peers_who_fixed(services.engine, record, courses)


@router.get("/submissions/{submission_id}/source.py")
def submission_source(submission_id: str, services: ServicesDep, principal: PrincipalDep) -> Response:
    """The submitted source as plain text, for whoever may read the submission (404 for anyone
    else): what "load into editor" fetches."""
    record = visible_submission(services, submission_id, principal)
    return Response(
        record.source,
        media_type="text/plain; charset=utf-8",
        headers={"Cache-Control": "private, no-store", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/submissions/{submission_id}/status")
def submission_status(submission_id: str, services: ServicesDep, principal: PrincipalDep) -> JSONResponse:
    record = visible_submission(services, submission_id, principal)
    return JSONResponse({"id": record.id, "status": str(record.status), "verdict": record.verdict})


@router.get("/submissions/{submission_id}/panel", response_class=HTMLResponse)
def submission_panel(
    submission_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    record = visible_submission(services, submission_id, principal)
    report = report_of(record)
    if report is None:
        return HTMLResponse('<p class="pending">Not graded yet.</p>', status_code=status.HTTP_202_ACCEPTED)
    return render(
        request,
        "_panel.html",
        user,
        record=record,
        peers_fixed=_peers_fixed(services, record, user),
        **panel_context(report),
    )


@router.get("/me", response_class=HTMLResponse)
def my_submissions(request: Request, services: ServicesDep, user: OptionalUser) -> HTMLResponse:
    user = require_user(user, request)
    return render(
        request,
        "me.html",
        user,
        submissions=services.reports.for_user(user.id, limit=200),
        solved=services.reports.solved(user.id),
    )
