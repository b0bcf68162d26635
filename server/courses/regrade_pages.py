"""The regrade pages, for admins (`server.courses.course_pages` includes their router after its
own): `POST /instructor/problems/{slug}/regrade` starts a regrade of a problem's submissions and
opens its page, `GET /instructor/regrades/{id}` shows its progress and changed verdicts
(refreshes while unfinished). The same operation as `remat-judge problems regrade`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from server.authz import Action
from server.courses import admin
from server.courses.page_rendering import render_staff_page
from server.deps import ServicesDep
from server.store.courses import CourseError
from server.web.rendering import require_action
from server.web.sessions import OptionalUser, PrincipalDep, check_csrf

router = APIRouter(include_in_schema=False)


@router.post("/instructor/problems/{slug}/regrade")
def start_regrade(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    user = require_action(user, principal, request, Action.PROBLEMS_REGRADE)
    check_csrf(request, csrf_token)
    try:
        regrade = admin.start_regrade(services.regrades, services.problems, slug, requested_by=user.email)
    except CourseError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    if services.pool is not None:  # embedded mode: enqueue now rather than at the next sweep
        services.pool.sweeper.sweep(everything=False)
    return RedirectResponse(f"/instructor/regrades/{regrade.id}", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/instructor/regrades/{regrade_id}", response_class=HTMLResponse)
def regrade_page(
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    regrade_id: Annotated[int, PathParam(ge=1, le=2**31 - 1)],
) -> HTMLResponse:
    user = require_action(user, principal, request, Action.PROBLEMS_REGRADE)
    progress = services.regrades.progress(regrade_id)
    if progress is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no regrade #{regrade_id}")
    return render_staff_page(request, "regrade.html", user, progress=progress)
