"""The admin's upload page: upload a problem package from the browser and watch its validation
(the same checks, table and outcome as `POST /api/v1/problems` and `remat-judge problems add
--server`; `server/problems/uploads.py`).

- `GET /instructor/problems/upload`: the form (a .tar.gz of the package folder, publish or not);
- `POST /instructor/problems/upload`: quick checks at once (the form again with every error), else
  303 to the upload's page;
- `GET /instructor/problems/uploads/{id}`: state, progress, the reference's failed self-checks,
  the validation table and warnings; it refreshes itself every 2 s while validating. Once the
  package is installed unpublished, a Publish button;
- `POST /instructor/problems/uploads/{id}/publish`: publishes exactly the version that upload
  validated (`server.problems.uploads.publish_upload`, the same `graders.problems.publication.publish` as
  `problems publish`), then 303 back to the upload's page; refused (409, 422) on that page in red.

A refused upload's form comes back with the error and the publish choice as they were; the file
input cannot be refilled by a server, so `static/upload.js` sends the form with fetch and only
swaps the error in, leaving the chosen file chosen (without JavaScript the author picks it again).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from server.authz import Action
from server.problems import uploads
from server.problems.packages import MAX_ARCHIVE_BYTES
from server.services import Services
from server.store.accounts import UserRecord
from server.store.submissions import SUBMISSION_ID
from server.web.rendering import render, require_action
from server.web.sessions import OptionalUser, PrincipalDep, ServicesDep, check_csrf

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)


@router.get("/instructor/problems/upload", response_class=HTMLResponse)
def upload_form(request: Request, user: OptionalUser, principal: PrincipalDep) -> HTMLResponse:
    user = require_action(user, principal, request, Action.PROBLEMS_MANAGE)
    return render(request, "upload.html", user, error=None, limit_bytes=MAX_ARCHIVE_BYTES, publish=False)


@router.post("/instructor/problems/upload", response_class=HTMLResponse)
async def upload_package(
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    package: Annotated[UploadFile | None, File()] = None,
    publish: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Starts an upload; the form again (400/422) with what is wrong when the quick checks fail."""
    user = require_action(user, principal, request, Action.PROBLEMS_MANAGE)
    check_csrf(request, csrf_token)
    data = await package.read(MAX_ARCHIVE_BYTES + 1) if package is not None else b""
    error, code = None, status.HTTP_400_BAD_REQUEST
    if not data:
        error = "choose a package: a .tar.gz of the problem's folder (tar czf pkg.tar.gz my_problem)"
    elif len(data) > MAX_ARCHIVE_BYTES:
        error, code = f"the archive is larger than {MAX_ARCHIVE_BYTES:,} bytes", status.HTTP_413_CONTENT_TOO_LARGE
    else:
        try:
            upload_id = await run_in_threadpool(
                uploads.start, services, data, publish=publish == "on", requested_by=user.email
            )
        except uploads.UploadRefused as refused:
            error, code = refused.message, refused.status_code
        else:
            return RedirectResponse(f"/instructor/problems/uploads/{upload_id}", status_code=status.HTTP_303_SEE_OTHER)
    return render(
        request,
        "upload.html",
        user,
        error=error,
        limit_bytes=MAX_ARCHIVE_BYTES,
        publish=publish == "on",
        status_code=code,
    )


def _upload_view(services: Services, upload_id: str) -> uploads.UploadView:
    view = services.uploads.get(upload_id) if SUBMISSION_ID.match(upload_id) else None
    if view is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such upload")
    return view


def _status_page(
    request: Request,
    services: Services,
    user: UserRecord,
    view: uploads.UploadView,
    *,
    publish_error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    response = render(
        request,
        "upload_status.html",
        user,
        upload=view.public(),
        publishing=uploads.publishing(services.settings.problems_dir, view),
        publish_error=publish_error,
        status_code=status_code,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/instructor/problems/uploads/{upload_id}", response_class=HTMLResponse)
def upload_page(
    upload_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    user = require_action(user, principal, request, Action.PROBLEMS_MANAGE)
    return _status_page(request, services, user, _upload_view(services, upload_id))


@router.post("/instructor/problems/uploads/{upload_id}/publish", response_class=HTMLResponse)
def publish_upload(
    upload_id: str,
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    principal: PrincipalDep,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Publishes the version the upload validated; its page again, with why not in red, when refused."""
    user = require_action(user, principal, request, Action.PROBLEMS_MANAGE)
    check_csrf(request, csrf_token)
    view = _upload_view(services, upload_id)
    try:
        uploads.publish_upload(services, view)
    except uploads.UploadRefused as refused:
        return _status_page(
            request, services, user, view, publish_error=refused.message, status_code=refused.status_code
        )
    log.info("%s published %s version %s from upload %s", user.email, view.slug, view.version, view.id)
    return RedirectResponse(f"/instructor/problems/uploads/{upload_id}", status_code=status.HTTP_303_SEE_OTHER)
