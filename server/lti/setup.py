"""The administrator's side of LTI: the set-up page, grade passback, one-URL
registration, and saying at once why grades would not arrive.

- `GET /lti/setup` (admins): what to paste into an LMS, a Canvas developer key URL
  (`/lti/canvas.json`), a button that makes a one-time dynamic registration URL, and the registered
  platforms, each with what would stop its grades (`server.lti.ags.network_advice` on its token
  URL: "10.0.0.5 is a private address: add 10.0.0.0/8 to REMAT_JUDGE_LTI_ALLOW_NETWORKS") and a
  "test connection" button that fetches its keyset and an access token and shows the outcome.
- `GET /lti/grades` (admins): every grade passback row; `POST /lti/grades/resend` sends the
  failed and refused ones again once the cause is fixed.
- `GET /lti/dynamic-registration/{token}`: LTI Dynamic Registration 1.0, opened by the platform
  with `openid_configuration` and `registration_token` (`server.lti.registration`).
- `GET /lti/canvas.json`: Canvas's developer key configuration ("Enter URL").
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlsplit

import jwt
from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from server.deps import ServicesDep
from server.lti.ags import SCOPE_SCORE, AgsClient, TokenError
from server.lti.lti_pages import admins_only, lti_page
from server.lti.registration import (
    CLOSE_MESSAGE,
    RegistrationError,
    canvas_configuration,
    fetch_configuration,
    register_with,
)
from server.lti.service import LtiDep, LtiService
from server.store.lti import PlatformView
from server.web.sessions import check_csrf, user_of

router = APIRouter(prefix="/lti", include_in_schema=False)


def platform_advice(service: LtiService, platform: PlatformView) -> str | None:
    """What would stop this platform's grades (its token URL outside the allowed networks, or a
    host that does not resolve), or None."""
    return service.client.advice(platform.auth_token_url)


def _setup_page(request: Request, service: LtiService, **context: Any) -> HTMLResponse:
    platforms = service.store.platforms()
    return lti_page(
        request,
        "lti_setup.html",
        base=service.base_url(request),
        kid=service.key.kid,
        pem=service.key.public_pem(),
        jwk=json.dumps(service.key.public_jwk(), indent=2),
        platforms=[(p, platform_advice(service, p)) for p in platforms],
        undelivered=sum(1 for row in service.passbacks.rows() if row.status in ("failed", "refused")),
        **context,
    )


@router.get("/setup", response_class=HTMLResponse)
def setup(request: Request, service: LtiDep, services: ServicesDep) -> Response:
    """Admins only: the URLs and the public key to paste into an LMS, one-URL registration, and
    the registered platforms with what would stop their grades. Others: 303 to sign in, or 403."""
    refused = admins_only(request, services, "/lti/setup")
    if refused is not None:
        return refused
    return _setup_page(request, service)


@router.post("/setup/registration-url", response_class=HTMLResponse)
def make_registration_url(
    request: Request,
    service: LtiDep,
    services: ServicesDep,
    csrf_token: Annotated[str, Form()] = "",
    expires_minutes: Annotated[int, Form(ge=1, le=7 * 24 * 60)] = 60,
) -> Response:
    """Admins only: a new one-time dynamic registration URL, shown once on the set-up page."""
    refused = admins_only(request, services, "/lti/setup")
    if refused is not None:
        return refused
    check_csrf(request, csrf_token)
    assert service.registrations is not None
    user = user_of(request, services)
    token = service.registrations.issue(created_by=user.email if user else "admin", expires_minutes=expires_minutes)
    return _setup_page(
        request,
        service,
        registration_url=f"{service.base_url(request)}/lti/dynamic-registration/{token}",
        registration_minutes=expires_minutes,
    )


@router.post("/setup/test", response_class=HTMLResponse)
def test_connection(
    request: Request,
    service: LtiDep,
    services: ServicesDep,
    platform_id: Annotated[int, Form()] = 0,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Admins only: fetches the platform's keyset (as a launch does) and an access token for
    scores (as grade passback does), and shows each outcome on the set-up page."""
    refused = admins_only(request, services, "/lti/setup")
    if refused is not None:
        return refused
    check_csrf(request, csrf_token)
    platform = service.store.platform_by_id(platform_id)
    if platform is None:
        return _setup_page(request, service, test=None, test_error="no such platform")
    checks: list[tuple[str, bool, str]] = []
    try:
        keys = jwt.PyJWKClient(platform.keyset_url, cache_keys=False, timeout=service.client.timeout_s).get_jwk_set()
        checks.append(("keyset", True, f"{len(keys.keys)} key(s) at {platform.keyset_url}"))
    except (jwt.PyJWKClientError, jwt.PyJWKSetError) as exc:
        checks.append(("keyset", False, f"{platform.keyset_url}: {str(exc)[:200]}"))
    advice = platform_advice(service, platform)
    try:
        fresh = AgsClient(
            timeout_s=service.client.timeout_s,  # no cached token: ask the platform now
            allow_networks=[str(n) for n in service.client.allow_networks],
        )
        fresh.access_token(platform, service.key, [SCOPE_SCORE])
        checks.append(("access token", True, f"the token URL {platform.auth_token_url} gave a token for scores"))
    except TokenError as exc:
        checks.append(("access token", False, f"{exc}" + (f" ({advice})" if advice and advice not in str(exc) else "")))
    return _setup_page(request, service, test=platform, checks=checks)


@router.get("/grades", response_class=HTMLResponse)
def grades(request: Request, service: LtiDep, services: ServicesDep) -> Response:
    """Admins only: grade passback to the LMS, one row per student and resource link, with its
    status (idle, pending, delivered, failed, refused) and the platform's last error."""
    refused = admins_only(request, services, "/lti/grades")
    if refused is not None:
        return refused
    return lti_page(request, "lti_grades.html", rows=service.passbacks.rows())


@router.post("/grades/resend", response_class=HTMLResponse)
def resend(
    request: Request, service: LtiDep, services: ServicesDep, csrf_token: Annotated[str, Form()] = ""
) -> Response:
    """Admins only: every failed or refused grade is sent again (after its cause was fixed)."""
    refused = admins_only(request, services, "/lti/grades")
    if refused is not None:
        return refused
    check_csrf(request, csrf_token)
    count = service.passbacks.send_undelivered_again()
    return lti_page(
        request,
        "lti_grades.html",
        rows=service.passbacks.rows(),
        notice=f"{count} grade{'s' if count != 1 else ''} will be sent again.",
    )


@router.get("/canvas.json")
def canvas_json(request: Request, service: LtiDep) -> JSONResponse:
    """Canvas's developer key JSON configuration ("LTI key", method "Enter URL")."""
    return JSONResponse(canvas_configuration(service.base_url(request)), headers={"Cache-Control": "no-store"})


@router.get("/dynamic-registration/{token}", response_class=HTMLResponse)
def dynamic_registration(
    request: Request, service: LtiDep, token: str, openid_configuration: str = "", registration_token: str = ""
) -> Response:
    """LTI Dynamic Registration 1.0, the tool's side: the platform opens the one-time URL with
    its OpenID configuration URL (and a registration token). The judge fetches it, registers
    itself, stores the platform and answers a page that tells the platform to close the dialog.
    410 for a used or expired URL (nothing registered); 400 without `openid_configuration`; 502
    with the reason when the platform's configuration or registration fails (the URL can then be
    used again)."""
    store = service.registrations
    assert store is not None
    if len(token) > 100 or not store.usable(token):
        return lti_page(
            request,
            "lti_registered.html",
            status_code=410,
            ok=False,
            detail="This registration URL was used already or has expired: ask the judge's administrator "
            "for a new one (remat-judge lti registration-url, or /lti/setup).",
        )
    if not openid_configuration:
        return lti_page(
            request,
            "lti_registered.html",
            status_code=400,
            ok=False,
            detail="Open this URL from the LMS's tool registration (it adds openid_configuration).",
        )
    if not store.spend(token):  # used once: a second platform racing with the same URL registers nothing
        return lti_page(
            request, "lti_registered.html", status_code=410, ok=False, detail="This registration URL was used already."
        )
    base = service.base_url(request)
    try:
        configuration = fetch_configuration(service.client, openid_configuration)
        client_id, deployment_id = register_with(service.client, configuration, base, registration_token or None)
    except RegistrationError as exc:
        store.unspend(token)  # nothing was registered: the administrator may fix the cause and retry
        return lti_page(request, "lti_registered.html", status_code=502, ok=False, detail=str(exc))
    platform = service.store.register(
        issuer=configuration.issuer,
        client_id=client_id,
        deployment_ids=[deployment_id] if deployment_id else [],
        auth_login_url=configuration.authorization_endpoint,
        auth_token_url=configuration.token_endpoint,
        keyset_url=configuration.jwks_uri,
    )
    store.record_platform(token, platform.id)
    return lti_page(
        request,
        "lti_registered.html",
        ok=True,
        platform=platform,
        close=json.dumps(CLOSE_MESSAGE),
        advice=platform_advice(service, platform),
        product=configuration.product,
        host=urlsplit(configuration.issuer).hostname or configuration.issuer,
    )
