"""What every server-rendered page shares: the Jinja2 templates with their filters, `render` (the
fields every template uses), the problem and submission a principal may see, the sign-in and
role guards, and the error page."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from graders.problems.problem import Problem
from graders.problems.spec import ProblemError
from graders.verdict import VerdictReport
from server.authz import ANONYMOUS, Action, Principal, decide
from server.services import Services
from server.store.accounts import UserRecord
from server.store.submissions import SUBMISSION_ID, SubmissionRecord
from server.web.formatting import FILTERS
from server.web.markdown import render_markdown
from server.web.sessions import (
    csrf_token,
)

HERE = WEB_DIR = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))


templates.env.filters.update(FILTERS)  # human_bytes, human_flops
templates.env.filters["markdown"] = lambda text: Markup(render_markdown(text))  # raw HTML disabled in it


def render(
    request: Request, name: str, user: UserRecord | None, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """A page with the fields every template uses (user, their principal, CSRF token, whether the
    JS bundle exists). The principal is the one this request's dependencies looked up."""
    principal = request.scope.get("remat_principal", ANONYMOUS) if user is not None else ANONYMOUS
    return templates.TemplateResponse(
        request,
        name,
        {
            "user": user,
            "principal": principal,
            "csrf": csrf_token(request),
            "bundle": (HERE / "static" / "dist" / "app.js").exists(),
            **context,
        },
        status_code=status_code,
    )


def visible_problem(services: Services, slug: str, principal: Principal) -> Problem:
    """The problem `slug`; 404 when there is none, or it is unpublished and `principal` may not
    manage problems."""
    try:
        if not decide(principal, Action.PROBLEMS_MANAGE) and not services.problems.is_published(slug):
            raise KeyError(slug)
        return services.problems.get(slug)
    except (KeyError, ProblemError):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such problem") from None


def sign_in_redirect(request: Request) -> HTTPException:
    """A 303 to the sign-in page that comes back to this page (its path percent-encoded, so any
    path makes a valid Location header)."""
    return HTTPException(
        status.HTTP_303_SEE_OTHER, headers={"Location": "/signin?" + urlencode({"next": request.url.path})}
    )


def require_user(user: UserRecord | None, request: Request) -> UserRecord:
    if user is None:
        raise sign_in_redirect(request)
    return user


def visible_submission(services: Services, submission_id: str, principal: Principal) -> SubmissionRecord:
    """A submission `principal` may read (`submission.read`: its author, the staff of a course
    where it is an assignment of the author's, admins); 404 for anyone else, as for an unknown id."""
    record = services.submissions.get(submission_id) if SUBMISSION_ID.match(submission_id) else None
    if (
        record is None
        or principal.user_id is None
        and not principal.admin
        or not services.access.may_read(principal, record)
    ):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission")
    return record


def report_of(record: SubmissionRecord) -> VerdictReport | None:
    return VerdictReport.model_validate_json(record.result_json) if record.result_json else None


def require_teacher(user: UserRecord | None, principal: Principal, request: Request) -> UserRecord:
    """The signed-in user, when the instructor pages have anything for them (an admin, or staff of
    a course); else 303 to sign in, or 403."""
    user = require_user(user, request)
    if not principal.teaches:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "for course staff and admins only")
    return user


def require_action(user: UserRecord | None, principal: Principal, request: Request, action: Action) -> UserRecord:
    """The signed-in user, when `principal` may do the site-wide `action`; else 303 to sign in, or 403."""
    user = require_user(user, request)
    if not decide(principal, action):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "for admins only")
    return user


def error_page(request: Request, exc: Any) -> Response:
    """HTML error pages for browsers; JSON stays JSON for the API. The page shows the user this
    request's dependencies signed in (none when it failed before them)."""
    if exc.status_code == status.HTTP_303_SEE_OTHER:
        return RedirectResponse(exc.headers["Location"], status_code=status.HTTP_303_SEE_OTHER)
    response = render(
        request,
        "error.html",
        request.scope.get("remat_user"),
        status_code=exc.status_code,
        code=exc.status_code,
        detail=str(exc.detail),
    )
    if exc.status_code in (429, 503) and getattr(exc, "headers", None) and "Retry-After" in exc.headers:
        response.headers["Retry-After"] = exc.headers["Retry-After"]
    return response
