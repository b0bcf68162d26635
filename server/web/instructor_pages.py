"""The instructor's views: verdict counts and recent submissions (everyone's for an admin, their
courses' students' for course staff), one problem's students and regrades, API clients, and a
submission's highlighted source."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from server.authz import Access, Action, decide
from server.delivery.targets import check_prefix
from server.deps import ServicesDep
from server.services import Services
from server.store.accounts import UserRecord
from server.web.markdown import highlight_python
from server.web.rendering import render, require_action, require_teacher, visible_problem, visible_submission
from server.web.sessions import (
    OptionalUser,
    PrincipalDep,
    check_csrf,
)

router = APIRouter(include_in_schema=False)


@router.get("/instructor", response_class=HTMLResponse)
def instructor_home(
    request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep, problem: str | None = None
) -> HTMLResponse:
    """Verdict counts and recent submissions: everyone's for an admin, the students of their
    courses (on those courses' assignments) for course staff."""
    user = require_teacher(user, principal, request)
    scope = Access.submission_scope(principal)
    counts = services.reports.verdict_counts(scope)
    return render(
        request,
        "instructor.html",
        user,
        submissions=services.reports.recent(problem=problem, limit=300, scope=scope),
        counts=counts,
        students=services.reports.student_counts(scope),
        problems=services.problems.all(published_only=not decide(principal, Action.PROBLEMS_MANAGE)),
        selected=problem,
        admin=principal.admin,
    )


@router.get("/instructor/problems/{slug}", response_class=HTMLResponse)
def instructor_problem(
    slug: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """One problem's verdicts and students (scoped as on `/instructor`); admins also regrade it."""
    user = require_teacher(user, principal, request)
    problem = visible_problem(services, slug, principal)
    scope = Access.submission_scope(principal)
    counts = services.reports.verdict_counts(scope).get(slug, {})

    may_regrade = decide(principal, Action.PROBLEMS_REGRADE)
    regrades = services.regrades.recent(problem=slug) if may_regrade else []
    hints_asked = {}

    hints_asked = services.hints.requested_counts(slug)
    return render(
        request,
        "instructor_problem.html",
        user,
        problem=problem,
        counts=counts,
        total=sum(counts.values()),
        submissions=services.reports.recent(problem=slug, limit=300, scope=scope),
        regrades=regrades,
        may_regrade=may_regrade,
        students=services.reports.per_student(slug, scope),
        hints_asked=hints_asked,
    )


def _clients_page(
    request: Request, services: Services, user: UserRecord, status_code: int = 200, **context: Any
) -> HTMLResponse:
    return render(
        request, "instructor_clients.html", user, clients=services.clients.all(), status_code=status_code, **context
    )


@router.get("/instructor/clients", response_class=HTMLResponse)
def instructor_clients(
    request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """API clients: list, create (the key shown once), revoke. Admins only."""
    return _clients_page(request, services, require_action(user, principal, request, Action.CLIENTS_MANAGE))


@router.post("/instructor/clients", response_class=HTMLResponse)
def instructor_create_client(
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    name: Annotated[str, Form()] = "",
    problems: Annotated[str, Form()] = "",
    callback_allow: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> HTMLResponse:
    user = require_action(user, principal, request, Action.CLIENTS_MANAGE)
    check_csrf(request, csrf_token)
    name = name.strip()
    scope = [p.strip() for p in problems.split(",") if p.strip()] or None
    prefixes = [line.strip() for line in callback_allow.splitlines() if line.strip()]
    error = None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", name):
        error = "the name: letters, digits, '_', '.', '-' (up to 64), starting with a letter or digit"
    elif scope is not None and (unknown := [p for p in scope if p not in set(services.problems.slugs())]):
        error = f"unknown problems: {', '.join(unknown)}"
    else:
        for prefix in prefixes:
            try:
                check_prefix(prefix)
            except ValueError as exc:
                error = str(exc)
                break
    if error is None:
        try:
            record, api_key = services.clients.create(name, problems=scope, callback_allow=prefixes)
        except ValueError as exc:
            error = str(exc)
        else:
            created = {"client_id": record.name, "api_key": api_key, "callback_secret": record.callback_secret}
            response = _clients_page(
                request,
                services,
                user,
                created=created,
                created_json=json.dumps(created, indent=2),
                status_code=status.HTTP_201_CREATED,
            )
            response.headers["Cache-Control"] = "no-store"
            return response
    return _clients_page(request, services, user, error=error, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


@router.post("/instructor/clients/{name}/revoke")
def instructor_revoke_client(
    name: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    require_action(user, principal, request, Action.CLIENTS_MANAGE)
    check_csrf(request, csrf_token)
    if not services.clients.revoke(name):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such active client")
    return RedirectResponse("/instructor/clients", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/instructor/submissions/{submission_id}/source", response_class=HTMLResponse)
def instructor_source(
    submission_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    """A submission's code, highlighted with line numbers (Pygments, never Markdown), with who
    made it, when and its verdict. For whoever teaches and may read the submission (404 otherwise)."""
    user = require_teacher(user, principal, request)
    record = visible_submission(services, submission_id, principal)
    author = services.users.get(record.user_id) if record.user_id is not None else None
    return render(
        request,
        "source.html",
        user,
        record=record,
        code=highlight_python(record.source),
        author=(author.contact_email or author.email)
        if author
        else ("API client" if record.client_id is not None else "anonymous"),
    )
