"""Which cookies a request gets: secure by the URL, so a session survives inside an LMS's iframe.

A judge served over HTTPS, which every LMS requires of a tool, runs inside the LMS's iframe: a
third-party context, where a browser sends back only `SameSite=None; Secure` cookies. So a
request is *secure* when the judge's public URL (`REMAT_JUDGE_PUBLIC_URL`) is `https://`, or the
request itself came over HTTPS (behind a TLS proxy, uvicorn's `--proxy-headers` turns a trusted
proxy's `X-Forwarded-Proto` into the request's scheme), or the operator forces it
(`REMAT_JUDGE_COOKIE_SECURE=true`). Secure requests get `SameSite=None; Secure` cookies, others
`SameSite=Lax` (a browser drops `SameSite=None` without `Secure`, and a `Secure` cookie set over
plain HTTP is kept by some browsers for localhost only). Every state-changing form still checks a
CSRF token, so `SameSite=None` opens no cross-site write.
"""

from __future__ import annotations

from typing import Any

from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Scope


def secure_request(scope: Scope, *, public_url: str | None, forced: bool) -> bool:
    """Whether cookies for this request are `SameSite=None; Secure` (see the module docstring)."""
    if forced:
        return True
    if public_url:
        return public_url.lower().startswith("https://")
    return scope.get("scheme") == "https"


class SchemeAwareSessions:
    """Starlette's signed session cookie, `SameSite=None; Secure` on secure requests and
    `SameSite=Lax` on the others (`secure_request`): two `SessionMiddleware` with one secret and
    cookie name, chosen per request."""

    def __init__(
        self, app: ASGIApp, *, secret_key: str, session_cookie: str, max_age: int, public_url: str | None, forced: bool
    ):
        self.public_url, self.forced = public_url, forced
        self.secure = SessionMiddleware(
            app,
            secret_key=secret_key,
            session_cookie=session_cookie,
            max_age=max_age,
            same_site="none",
            https_only=True,
        )
        self.lax = SessionMiddleware(
            app,
            secret_key=secret_key,
            session_cookie=session_cookie,
            max_age=max_age,
            same_site="lax",
            https_only=False,
        )

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and secure_request(
            scope, public_url=self.public_url, forced=self.forced
        ):
            await self.secure(scope, receive, send)
        else:
            await self.lax(scope, receive, send)
