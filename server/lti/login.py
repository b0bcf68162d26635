"""OIDC third-party initiated login (Security Framework 5.1.1.1), step 1 of the flow that
`server.lti.routes` describes: a new state and nonce, the browser binding (a cookie, or the
platform's postMessage storage), and the redirect to the platform's auth-login-url."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from server.lti.launch import (
    LaunchError,
)
from server.lti.lti_pages import NO_STORE, count_launch, lti_page, origin_of, refusal_page
from server.lti.service import LtiDep, LtiService
from server.store.lti import LOGIN_TTL_S, PlatformView, sha256_hex

router = APIRouter(prefix="/lti", include_in_schema=False)


STATE_COOKIE_PREFIX = "remat_lti_state_"


STORAGE_TARGET = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # a frame name (Canvas: post_message_forwarding) or _parent


def state_cookie_name(state: str) -> str:
    """The name of the cookie binding `state` to the browser: one per login, so launches of
    several links on one course page (each in its own iframe) do not overwrite each other."""
    return STATE_COOKIE_PREFIX + sha256_hex("cookie:" + state)[:16]


def _with_query(url: str, params: dict[str, str]) -> str:
    """`url` with `params` added to its query string (an auth-login-url may carry one already)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + [(k, v) for k, v in params.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _platform_for(service: LtiService, iss: str, client_id: str) -> PlatformView:
    """The registered platform a login names.

    Raises:
        LaunchError(400): no issuer; the issuer is unknown; it has several registrations and the
            login names no client_id (or an unknown one).
    """
    if not iss:
        raise LaunchError(400, "The login initiation names no platform (iss).")
    found = service.store.platforms_for(iss, client_id or None)
    if not found:
        raise LaunchError(
            400, "This platform is not registered with the judge (an administrator registers it: /lti/setup)."
        )
    if len(found) > 1:
        raise LaunchError(400, "This platform has several registrations: the login must name its client_id.")
    return found[0]


def _checked_platform(
    request: Request,
    service: LtiService,
    *,
    iss: str,
    login_hint: str,
    target_link_uri: str,
    client_id: str,
    lti_deployment_id: str,
) -> PlatformView:
    """The registered platform of a login initiation, once it is counted and its parameters checked.

    Raises:
        LaunchError: the service's HTTPS refusal; `_platform_for`'s; 400 no login_hint or no
            target_link_uri; 403 an unregistered deployment.
    """
    refusal = service.https_refusal(request)
    if refusal is not None:
        raise refusal
    platform = _platform_for(service, iss, client_id)
    count_launch(request, service, platform.issuer)
    if not login_hint:
        raise LaunchError(400, "The login initiation names no user (login_hint).")
    if not target_link_uri:
        raise LaunchError(400, "The login initiation names no target_link_uri.")
    if lti_deployment_id and lti_deployment_id not in platform.deployment_ids:
        raise LaunchError(403, "This deployment of the tool is not registered with the judge.")
    return platform


def _auth_params(
    request: Request,
    service: LtiService,
    platform: PlatformView,
    *,
    login_hint: str,
    lti_message_hint: str,
    state: str,
    nonce: str,
) -> dict[str, str]:
    """The query parameters of the authentication request sent to the platform's auth-login-url."""
    params = {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": platform.client_id,
        "redirect_uri": service.base_url(request) + "/lti/launch",
        "login_hint": login_hint,
        "state": state,
        "nonce": nonce,
    }
    if lti_message_hint:
        params["lti_message_hint"] = lti_message_hint
    return params


def _set_state_cookie(request: Request, service: LtiService, response: Response, state: str) -> None:
    """Sets the cookie binding `state` to the browser on `response` (SameSite=None over HTTPS, else Lax)."""
    # A cross-site launch POST brings back only a SameSite=None cookie, and browsers drop SameSite=None
    # without Secure, so plain HTTP gets Lax (see the module's docstring).
    secure = service.secure(request)
    response.set_cookie(
        state_cookie_name(state),
        sha256_hex(state),
        max_age=LOGIN_TTL_S,
        path="/lti/launch",
        httponly=True,
        secure=secure,
        samesite="none" if secure else "lax",
    )


def _login(
    request: Request,
    service: LtiService,
    *,
    iss: str,
    login_hint: str,
    target_link_uri: str,
    lti_message_hint: str,
    client_id: str,
    lti_deployment_id: str,
    lti_storage_target: str = "",
) -> Response:
    try:
        platform = _checked_platform(
            request,
            service,
            iss=iss,
            login_hint=login_hint,
            target_link_uri=target_link_uri,
            client_id=client_id,
            lti_deployment_id=lti_deployment_id,
        )
    except LaunchError as error:
        return refusal_page(request, error)
    target = lti_storage_target if STORAGE_TARGET.fullmatch(lti_storage_target) else None
    platform_origin = origin_of(platform.auth_login_url)
    relaunch = {
        name: value
        for name, value in (
            ("iss", iss),
            ("login_hint", login_hint),
            ("lti_message_hint", lti_message_hint),
            ("target_link_uri", target_link_uri),
            ("client_id", client_id or platform.client_id),
            ("lti_deployment_id", lti_deployment_id),
        )
        if value
    }
    state, nonce, binding = service.store.start_login(
        platform.id, storage_target=target if platform_origin else None, relaunch=relaunch
    )
    params = _auth_params(
        request, service, platform, login_hint=login_hint, lti_message_hint=lti_message_hint, state=state, nonce=nonce
    )
    auth_url = _with_query(platform.auth_login_url, params)
    if binding is not None:  # the platform keeps the binding for us (postMessage storage), then we go on
        response: Response = lti_page(
            request,
            "lti_storage.html",
            mode="put",
            target=target,
            origin=platform_origin,
            key=storage_key(state),
            value=binding,
            next_url=auth_url,
        )
    else:
        response = RedirectResponse(auth_url, status_code=302, headers=NO_STORE)
    _set_state_cookie(request, service, response, state)
    return response


def storage_key(state: str) -> str:
    """The platform storage key of a login's binding (not the state itself: the key is visible to
    the platform's storage frame)."""
    return "remat_judge_" + sha256_hex("storage:" + state)[:32]


@router.get("/login")
def login_get(
    request: Request,
    service: LtiDep,
    iss: str = "",
    login_hint: str = "",
    target_link_uri: str = "",
    lti_message_hint: str = "",
    client_id: str = "",
    lti_deployment_id: str = "",
    lti_storage_target: str = "",
) -> Response:
    """OIDC third-party initiated login (Security Framework 5.1.1.1), by GET."""
    return _login(
        request,
        service,
        iss=iss,
        login_hint=login_hint,
        target_link_uri=target_link_uri,
        lti_message_hint=lti_message_hint,
        client_id=client_id,
        lti_deployment_id=lti_deployment_id,
        lti_storage_target=lti_storage_target,
    )


@router.post("/login")
def login_post(
    request: Request,
    service: LtiDep,
    iss: Annotated[str, Form()] = "",
    login_hint: Annotated[str, Form()] = "",
    target_link_uri: Annotated[str, Form()] = "",
    lti_message_hint: Annotated[str, Form()] = "",
    client_id: Annotated[str, Form()] = "",
    lti_deployment_id: Annotated[str, Form()] = "",
    lti_storage_target: Annotated[str, Form()] = "",
) -> Response:
    """OIDC third-party initiated login (Security Framework 5.1.1.1), by POST."""
    return _login(
        request,
        service,
        iss=iss,
        login_hint=login_hint,
        target_link_uri=target_link_uri,
        lti_message_hint=lti_message_hint,
        client_id=client_id,
        lti_deployment_id=lti_deployment_id,
        lti_storage_target=lti_storage_target,
    )
