"""The admin's upload page: upload a problem package from the browser and watch its validation
(the same checks, table and outcome as `POST /api/v1/problems` and `remat-judge problems add
--server`; `server/uploads.py`).

- `GET /instructor/problems/upload`: the form (a .tar.gz of the package folder, publish or not);
- `POST /instructor/problems/upload`: quick checks at once (the form again with every error), else
  303 to the upload's page;
- `GET /instructor/problems/uploads/{id}`: state, progress, the reference's failed self-checks,
  the validation table and warnings; it refreshes itself every 2 s while validating.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from server import uploads
from server.authz import Action
from server.store.submissions import SUBMISSION_ID
from server.packages import MAX_ARCHIVE_BYTES
from server.web.auth import OptionalUser, PrincipalDep, ServicesDep, check_csrf
from server.web.common import render, require_action

router = APIRouter(include_in_schema=False)


@router.get("/instructor/problems/upload", response_class=HTMLResponse)
def upload_form(request: Request, user: OptionalUser, principal: PrincipalDep) -> HTMLResponse:
    user = require_action(user, principal, request, Action.PROBLEMS_MANAGE)
    return render(request, "upload.html", user, error=None, limit_bytes=MAX_ARCHIVE_BYTES)


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
    return render(request, "upload.html", user, error=error, limit_bytes=MAX_ARCHIVE_BYTES, status_code=code)


@router.get("/instructor/problems/uploads/{upload_id}", response_class=HTMLResponse)
def upload_page(
    upload_id: str, request: Request, services: ServicesDep, user: OptionalUser, principal: PrincipalDep
) -> HTMLResponse:
    user = require_action(user, principal, request, Action.PROBLEMS_MANAGE)
    view = uploads.UploadStore(services.engine).get(upload_id) if SUBMISSION_ID.match(upload_id) else None
    if view is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such upload")
    response = render(request, "upload_status.html", user, upload=view.public())
    response.headers["Cache-Control"] = "no-store"
    return response
