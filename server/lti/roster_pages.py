"""The roster sync button of an LMS course's instructor page: `POST /instructor/courses/{key}/roster`
(a form with the session's CSRF token, like the page's other forms) syncs the course's roster from
its LMS (LTI Names and Role Provisioning Services 2.0, `server.lti.nrps.sync_course`) and shows
the course page again with what was stored, or with why nothing was.

Who may: the course's staff and admins (`course.roster` in `server.authz`); anyone else gets the
course page's own refusals (303 to sign in, 404 for a course they do not teach, 403 otherwise).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import HTMLResponse

from server.authz import Action
from server.courses.course_pages import render_course_page, staffed_course
from server.deps import ServicesDep
from server.lti.nrps import NoRosterService, RosterError, sync_course
from server.lti.service import LtiDep
from server.web.rendering import require_teacher
from server.web.sessions import OptionalUser, PrincipalDep, check_csrf

router = APIRouter(include_in_schema=False)


@router.post("/instructor/courses/{key}/roster", response_class=HTMLResponse)
def sync_roster(
    key: str,
    request: Request,
    services: ServicesDep,
    service: LtiDep,
    user: OptionalUser,
    principal: PrincipalDep,
    csrf_token: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """Syncs the course's roster from its LMS and answers the course page: 200 with what was
    stored; 422 when the course has no roster service to sync (made on the judge, or no launch
    offered NRPS 2.0); 502 when the LMS's answer or the way to it failed (no token, a refusal, a
    time-out, a page too big, not JSON, a member without user_id): the message says which, and
    the roster stored before is kept."""
    user = require_teacher(user, principal, request)
    check_csrf(request, csrf_token)
    course = staffed_course(services, key, principal, Action.COURSE_ROSTER)
    try:
        report = sync_course(
            course, store=service.store, courses=service.courses, client=service.client, key=service.key
        )
    except NoRosterService as exc:
        return render_course_page(
            request,
            services,
            user,
            principal,
            course,
            error=str(exc),
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    except RosterError as exc:
        return render_course_page(
            request, services, user, principal, course, error=str(exc), status_code=status.HTTP_502_BAD_GATEWAY
        )
    return render_course_page(request, services, user, principal, course, notice=report.message)
