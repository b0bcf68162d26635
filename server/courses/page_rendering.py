"""The templates of the course, insight and regrade pages (this package's own, then the web
pages' base) and `render_staff_page`, which fills in what every one of them shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from server.authz import ANONYMOUS
from server.store.accounts import UserRecord
from server.web.formatting import FILTERS
from server.web.rendering import WEB_DIR
from server.web.sessions import csrf_token

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=[str(HERE / "templates"), str(WEB_DIR / "templates")])
templates.env.filters.update(FILTERS)


def render_staff_page(
    request: Request, name: str, user: UserRecord, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """Renders the template `name` for the signed-in `user`, with their principal, the session's
    CSRF token and whether the script bundle is built; never cached."""
    response = templates.TemplateResponse(
        request,
        name,
        {
            "user": user,
            "principal": request.scope.get("remat_principal", ANONYMOUS),
            "csrf": csrf_token(request),
            "bundle": (WEB_DIR / "static" / "dist" / "app.js").exists(),
            **context,
        },
        status_code=status_code,
    )
    response.headers["Cache-Control"] = "no-store"
    return response
