"""What the LTI pages share: their templates (the tool's own, then the web judge's), `lti_page` (an
LTI page for whoever the route signed in), refusals, the admins-only guard, the launch limits
(`count_launch`, `server.lti.service.LtiRateLimit`), and what every launch from a context does to
its course (`enter_context`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from fastapi import HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from server.authz import ANONYMOUS, Action, decide
from server.lti.launch import (
    LaunchError,
    context_of,
    memberships_url_of,
)
from server.lti.service import LtiService
from server.services import Services
from server.store.courses import Course, CourseRole
from server.web.formatting import FILTERS
from server.web.rendering import WEB_DIR
from server.web.sessions import csrf_token, principal_of, user_of

HERE = Path(__file__).resolve().parent


templates = Jinja2Templates(directory=[str(HERE / "templates"), str(WEB_DIR / "templates")])
templates.env.filters.update(FILTERS)


NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def enter_context(
    service: LtiService,
    *,
    platform_id: int,
    deployment_id: str,
    claims: dict[str, Any],
    user_id: int,
    role: CourseRole,
) -> Course | None:
    """What a verified launch (resource link or deep linking) does to the course of its context:
    the course is made at the context's first launch, the user is enrolled with the launch's role
    (`CourseStore.join_context`: an Instructor is staff at once, a Learner a student), and the
    context's Names and Role Provisioning Services 2.0 memberships URL is stored when the launch
    carries one (`memberships_url_of`). None (and nothing done) without a context claim.

    Raises:
        LaunchError(400): the context's id is not an identifier the judge can store.
    """
    context_id, title = context_of(claims)
    if context_id is None:
        return None
    course = service.courses.join_context(
        platform_id=platform_id,
        deployment_id=deployment_id,
        context_id=context_id,
        title=title,
        user_id=user_id,
        member_id=claims["sub"],
        role=role,
    )
    url = memberships_url_of(claims)
    if url is not None:
        service.store.save_memberships_url(
            platform_id=platform_id, deployment_id=deployment_id, context_id=context_id, url=url
        )
    return course


def lti_page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """An LTI page; it shows the user this request has signed in (if any: looked up by the route)."""
    response = templates.TemplateResponse(
        request,
        template,
        {
            "user": request.scope.get("remat_user"),
            "principal": request.scope.get("remat_principal", ANONYMOUS),
            "csrf": csrf_token(request),
            "bundle": (WEB_DIR / "static" / "dist" / "app.js").exists(),
            **context,
        },
        status_code=status_code,
    )
    response.headers.update(NO_STORE)
    return response


def refusal_page(request: Request, error: LaunchError) -> HTMLResponse:
    return lti_page(
        request, "lti_error.html", status_code=error.status_code, code=error.status_code, detail=error.message
    )


def admins_only(request: Request, services: Services, path: str) -> Response | None:
    """None for an admin (`lti.manage`); else a 303 to sign in, or a 403 page."""
    if user_of(request, services) is None:
        return RedirectResponse(f"/signin?{urlencode({'next': path})}", status_code=303)
    if not decide(principal_of(request, services), Action.LTI_MANAGE):
        return lti_page(request, "error.html", status_code=403, code=403, detail="for admins only")
    return None


def count_launch(request: Request, service: LtiService, platform: str | None = None) -> None:
    """Counts one launch (or deep linking pick) against the limits (`LtiRateLimit`). The address is
    the request's client, which uvicorn takes from a trusted proxy's X-Forwarded-For
    (`remat-judge serve --forwarded-allow-ips`).

    Raises:
        HTTPException(429) with Retry-After past a limit.
    """
    if service.limit is None:
        return
    wait_s = service.limit.retry_after_s(request.client.host if request.client else "unknown", platform)
    if wait_s is not None:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            "too many LTI launches from this address or platform; try again in a moment",
            headers={"Retry-After": str(wait_s)},
        )


def from_same_origin(request: Request, service: LtiService) -> bool:
    """Whether a POST came from a page of the judge itself: its Origin is the judge's (browsers
    send Origin with every POST and a site cannot forge it) and Sec-Fetch-Site, when sent, says
    same-origin."""
    return (
        request.headers.get("origin") == origin_of(service.base_url(request))
        and request.headers.get("sec-fetch-site", "same-origin") == "same-origin"
    )


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of an absolute http(s) URL, else None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"
