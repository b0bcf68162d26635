"""The tool's LTI 1.3 endpoints: its public JWKS, OIDC login initiation, the resource link launch,
and the landing that turns a launch into a session inside the LMS's iframe or a new window.

Flow (IMS Security Framework 5.1.1, LTI 1.3 Core 4):

1. `GET|POST /lti/login` (third-party initiated login, SF 5.1.1.1): the platform names itself
   (iss, client_id), the user (login_hint, lti_message_hint) and the target_link_uri. The tool
   stores a new state and nonce (`lti_logins`, 5 minutes), binds the state to this browser with a
   cookie holding its SHA-256, and redirects to the platform's auth-login-url (SF 5.1.1.2) with
   scope=openid, response_type=id_token, response_mode=form_post, prompt=none, client_id,
   login_hint, lti_message_hint, state, nonce and redirect_uri = `<public URL>/lti/launch`,
   exactly as registered: the problem is never appended to it (it travels in the
   target_link_uri claim or the custom claim).
2. `POST /lti/launch` (SF 5.1.1.3, the authentication response): consumes the state once,
   checks the browser binding, verifies the id_token (`server.lti.launch.verify_id_token`),
   remembers its nonce, finds or makes the account of (iss, sub), stores the resource link with
   its AGS endpoint claim, signs the user in, and redirects to `/lti/landing` with a one-time
   launch token.
3. `GET /lti/landing`: if the session cookie came back (top-level launch, or an iframe whose
   browser keeps our cookies), uses the token and opens the problem; otherwise (third-party
   cookies blocked) shows a link that opens `/lti/open?token=...` in a new window, where the
   token is exchanged for a session once.
4. Deep linking (`server/lti/deep_linking.py`): a verified `LtiDeepLinkingRequest` at
   `/lti/launch` from an instructor shows the problem list; `POST /lti/deep-linking` answers the
   platform's deep_link_return_url with the signed `LtiDeepLinkingResponse`.

Cookies and the browser binding (docs/ARCHITECTURE.md, "Launches without cookies"). The launch
is a cross-site POST from the platform, so the state-binding cookie comes back with it only when
it is `SameSite=None; Secure`: whenever the judge is reached over HTTPS (`LtiService.secure`).
Inside an iframe a browser that blocks third-party cookies drops even that; then a login that
named the platform's `lti_storage_target` (LTI Client Side postMessage Storage) keeps a random
binding in the platform's storage frame, and the launch reads it back (`launch_from_storage`).
Over HTTPS a launch bound neither way is refused (login CSRF), with the same login offered again
in a new window. Over plain HTTP (a local test only: `LtiService.https_refusal`), no cookie comes
with a cross-site POST, and the server-side state alone is checked.

None of these pages sends X-Frame-Options or a frame-ancestors policy (the app sends neither
today), so they open inside the LMS's iframe.
"""

from __future__ import annotations

import json
import re
import secrets
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit, urlunsplit, parse_qsl

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from graders.problem import ProblemError
from server.deps import LtiDep, ServicesDep
from server.services import Services
from server.authz import ANONYMOUS, Action, decide
from server.courses.models import CourseRole
from server.lti import deep_linking
from server.lti.ags import SCOPE_SCORE
from server.lti.launch import (
    CLAIM_MESSAGE_TYPE,
    CLAIM_ROLES,
    DEEP_LINKING_REQUEST,
    LEEWAY_S,
    RESOURCE_LINK_REQUEST,
    LaunchError,
    identifier,
    launch_of,
    person_email,
    person_name,
    role_for,
    verify_id_token,
)
from server.lti.models import LAUNCH_TOKEN_TTL_S, LOGIN_TTL_S, LtiStore, PendingLogin, PlatformView, sha256_hex
from server.lti.service import LtiService
from server.web.auth import csrf_token, principal_of, sign_in, user_of
from server.web.common import WEB_DIR
from server.web.formatting import FILTERS

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=[str(HERE / "templates"), str(WEB_DIR / "templates")])
templates.env.filters.update(FILTERS)
router = APIRouter(prefix="/lti", include_in_schema=False)

STATE_COOKIE_PREFIX = "remat_lti_state_"
STORAGE_TARGET = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # a frame name (Canvas: post_message_forwarding) or _parent
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _count_launch(request: Request, service: LtiService, platform: str | None = None) -> None:
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


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
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


def _refused(request: Request, error: LaunchError) -> HTMLResponse:
    return _page(request, "lti_error.html", status_code=error.status_code, code=error.status_code, detail=error.message)


def state_cookie_name(state: str) -> str:
    """The name of the cookie binding `state` to the browser: one per login, so launches of
    several links on one course page (each in its own iframe) do not overwrite each other."""
    return STATE_COOKIE_PREFIX + sha256_hex("cookie:" + state)[:16]


def _with_query(url: str, params: dict[str, str]) -> str:
    """`url` with `params` added to its query string (an auth-login-url may carry one already)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + [(k, v) for k, v in params.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


# --- the tool's keys --------------------------------------------------------------------------------


@router.get("/jwks")
def jwks(request: Request, service: LtiDep) -> JSONResponse:
    """The tool's public JWK Set (RFC 7517): platforms verify the tool's JWTs with it."""
    return JSONResponse(service.key.jwks(), headers={"Cache-Control": "public, max-age=300"})


def _admin_only(request: Request, services: Services, path: str) -> Response | None:
    """None for an admin (`lti.manage`); else a 303 to sign in, or a 403 page."""
    if user_of(request, services) is None:
        return RedirectResponse(f"/signin?{urlencode({'next': path})}", status_code=303)
    if not decide(principal_of(request, services), Action.LTI_MANAGE):
        return _page(request, "error.html", status_code=403, code=403, detail="for admins only")
    return None


# --- login initiation ------------------------------------------------------------------------------


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
        refusal = service.https_refusal(request)
        if refusal is not None:
            raise refusal
        platform = _platform_for(service, iss, client_id)
        _count_launch(request, service, platform.issuer)
        if not login_hint:
            raise LaunchError(400, "The login initiation names no user (login_hint).")
        if not target_link_uri:
            raise LaunchError(400, "The login initiation names no target_link_uri.")
        if lti_deployment_id and lti_deployment_id not in platform.deployment_ids:
            raise LaunchError(403, "This deployment of the tool is not registered with the judge.")
    except LaunchError as error:
        return _refused(request, error)
    target = lti_storage_target if STORAGE_TARGET.fullmatch(lti_storage_target) else None
    platform_origin = _origin(platform.auth_login_url)
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
    auth_url = _with_query(platform.auth_login_url, params)
    if binding is not None:  # the platform keeps the binding for us (postMessage storage), then we go on
        response: Response = _page(
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
    if service.secure(request):  # cross-site launch POST: only a SameSite=None cookie comes back with it
        response.set_cookie(
            state_cookie_name(state),
            sha256_hex(state),
            max_age=LOGIN_TTL_S,
            path="/lti/launch",
            httponly=True,
            secure=True,
            samesite="none",
        )
    else:  # plain HTTP: browsers drop SameSite=None without Secure (see the module's docstring)
        response.set_cookie(
            state_cookie_name(state),
            sha256_hex(state),
            max_age=LOGIN_TTL_S,
            path="/lti/launch",
            httponly=True,
            samesite="lax",
        )
    return response


def _origin(url: str) -> str | None:
    """`scheme://host[:port]` of an absolute http(s) URL, else None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


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


# --- launch ---------------------------------------------------------------------------------------


@router.post("/launch")
def launch(
    request: Request,
    service: LtiDep,
    services: ServicesDep,
    id_token: Annotated[str, Form()] = "",
    state: Annotated[str, Form()] = "",
) -> Response:
    """The authentication response (Security Framework 5.1.1.3): a resource link launch.

    Answers 303 to `/lti/landing?token=...` with the user signed in, or a 4xx page that signs
    nobody in: 400 without id_token or state, 403 for an unknown, expired, used or foreign state
    and for every failed check of the id_token, 404 for an unknown problem.

    The state must be bound to this browser (see "Launches without cookies" in
    docs/ARCHITECTURE.md): by its cookie; or, when the cookie did not come back and the login
    used the platform's postMessage storage, by the binding read back from that storage (this
    answers a page that reads it and posts to `/lti/launch/storage`); or, only where no cookie
    can come back with a cross-site POST at all (the judge reached over plain HTTP: a local
    test), by the server-side state alone. Over HTTPS, a launch with neither is refused with an
    offer to open the activity again in a new, first-party window.
    """
    try:
        if not state:
            raise LaunchError(400, "The launch carries no state: it did not start at this judge's login.")
        if not id_token:
            raise LaunchError(400, "The launch carries no id_token.")
        cookie = request.cookies.get(state_cookie_name(state))
        if cookie is not None and not secrets.compare_digest(cookie, sha256_hex(state)):
            raise LaunchError(403, "The launch's state belongs to another browser.")
        if cookie is None and any(name.startswith(STATE_COOKIE_PREFIX) for name in request.cookies):
            # this browser keeps our state cookies, yet has none for this state: another browser
            # started this login (login CSRF)
            raise LaunchError(403, "The launch's state belongs to another browser.")
        if cookie is None:
            pending = service.store.peek_login(state)
            if pending is not None and pending.storage_target:
                platform = service.store.platform_by_id(pending.platform_id)
                origin = _origin(platform.auth_login_url) if platform is not None else None
                if origin is not None:  # read the binding back from the platform's storage, then go on
                    page = _page(
                        request,
                        "lti_storage.html",
                        mode="get",
                        target=pending.storage_target,
                        origin=origin,
                        key=storage_key(state),
                        id_token=id_token,
                        state=state,
                    )
                    # a browser sends "Origin: null" with a POST from a no-referrer page, and
                    # `launch_from_storage` needs the judge's own origin there
                    page.headers["Referrer-Policy"] = "same-origin"
                    return page
        login = service.store.consume_login(state)  # used once, whatever follows
        if login is None:
            raise LaunchError(
                403, "The launch's state is unknown, expired or already used; launch again from the course."
            )
        if cookie is None and service.secure(request):
            return _relaunch(
                request,
                login,
                "Your browser did not send the judge's cookie with this launch (it "
                "blocks cookies inside the course page), and your course does not "
                "offer another way to tie the launch to your browser.",
            )
        # No cookie over plain HTTP (a local test: `https_refusal` refuses it elsewhere): a Lax
        # cookie never comes with a cross-site POST, so the server-side state alone is checked
        # (256 random bits, used once, 5 minutes, its nonce in the id_token). That stops replays
        # and forged launches but not login CSRF; over HTTPS it is never enough (above).
        return _verified_launch(request, services, service, state, id_token, login)
    except LaunchError as error:
        response = _refused(request, error)
        if state:
            response.delete_cookie(state_cookie_name(state), path="/lti/launch")
        return response


@router.post("/launch/storage")
def launch_from_storage(
    request: Request,
    service: LtiDep,
    services: ServicesDep,
    id_token: Annotated[str, Form()] = "",
    state: Annotated[str, Form()] = "",
    binding: Annotated[str, Form()] = "",
) -> Response:
    """The second half of a cookie-less launch through the platform's postMessage storage: the
    judge's own launch page (never another site: the Origin header must be the judge's, and
    Sec-Fetch-Site same-origin when sent) posts the id_token and state back with the binding it
    read from the platform's storage. The login is used once; a binding that is missing or not
    the login's (another browser's login: login CSRF) is refused with a relaunch offer."""
    try:
        if not state or not id_token:
            raise LaunchError(400, "The launch carries no state or no id_token.")
        if not _same_origin(request, service):
            raise LaunchError(403, "This form is posted by the judge's own launch page only.")
        login = service.store.consume_login(state)
        if login is None:
            raise LaunchError(
                403, "The launch's state is unknown, expired or already used; launch again from the course."
            )
        if not login.binding_matches(binding):
            return _relaunch(
                request,
                login,
                "The course page could not confirm that this launch started in your "
                "browser (its storage did not answer, or holds another launch).",
            )
        return _verified_launch(request, services, service, state, id_token, login)
    except LaunchError as error:
        return _refused(request, error)


def _same_origin(request: Request, service: LtiService) -> bool:
    """Whether a POST came from a page of the judge itself: its Origin is the judge's (browsers
    send Origin with every POST and a site cannot forge it) and Sec-Fetch-Site, when sent, says
    same-origin."""
    return (
        request.headers.get("origin") == _origin(service.base_url(request))
        and request.headers.get("sec-fetch-site", "same-origin") == "same-origin"
    )


def _relaunch(request: Request, login: PendingLogin, why: str) -> HTMLResponse:
    """A 403 that signs nobody in and offers the same login again in a new, first-party window,
    where the judge's state cookie comes back with the launch."""
    url = (
        f"/lti/login?{urlencode(login.relaunch)}"
        if login.relaunch.get("iss") and login.relaunch.get("login_hint")
        else None
    )
    return _page(request, "lti_relaunch.html", status_code=403, code=403, detail=why, relaunch_url=url)


def _verified_launch(
    request: Request, services: Services, service: LtiService, state: str, id_token: str, login: PendingLogin
) -> Response:
    """The launch once its state is bound to this browser: verifies the id_token and signs in.

    Raises:
        LaunchError: see `launch`.
    """
    platform_id, nonce = login.platform_id, login.nonce
    platform = service.store.platform_by_id(platform_id)
    if platform is None:
        raise LaunchError(403, "This platform's registration was removed.")
    claims = verify_id_token(
        id_token,
        issuer=platform.issuer,
        client_id=platform.client_id,
        deployment_ids=platform.deployment_ids,
        expected_nonce=nonce,
        key_for=lambda kid: service.jwks.key(platform.keyset_url, kid),
        message_types=(RESOURCE_LINK_REQUEST, DEEP_LINKING_REQUEST),
    )
    until = datetime.fromtimestamp(int(claims["exp"]), timezone.utc) + timedelta(seconds=LEEWAY_S)
    if not service.store.use_nonce(platform.issuer, claims["nonce"], until=until):
        raise LaunchError(403, "This launch was used already (its nonce was seen before).")
    if claims[CLAIM_MESSAGE_TYPE] == DEEP_LINKING_REQUEST:
        response = _deep_linking_request(request, services, service, platform, claims)
        response.delete_cookie(state_cookie_name(state), path="/lti/launch")
        return response
    verified = launch_of(claims)
    try:
        services.problems.get(verified.problem)
    except (KeyError, ProblemError):
        raise LaunchError(
            404, f"The course links to a problem the judge does not have: {verified.problem!r}."
        ) from None
    if not services.problems.is_published(verified.problem) and not _launches_an_admin(services, verified):
        who = "an admin of the judge publishes it" if verified.role == CourseRole.STAFF else "ask your instructor"
        raise LaunchError(404, f"The problem {verified.problem!r} is not published yet; {who}.")
    user = service.store.account_for(
        issuer=verified.issuer, sub=verified.sub, name=verified.name, email=verified.email, role=verified.role
    )  # never a site role
    link = service.store.save_resource_link(
        platform_id=platform.id,
        deployment_id=verified.deployment_id,
        resource_link_id=verified.resource_link_id,
        context_id=verified.context_id,
        title=verified.title,
        problem=verified.problem,
        ags=verified.ags,
    )
    if verified.context_id is not None:  # the LMS course: enrollment, and the link's problem as an assignment
        course = service.courses.for_context(
            platform_id=platform.id,
            deployment_id=verified.deployment_id,
            context_id=verified.context_id,
            title=verified.context_title,
        )
        service.courses.enroll(course.id, user.id, verified.role)
        service.courses.ensure_assignment(course.id, verified.problem)
    if verified.role == CourseRole.STUDENT and link.ags_lineitem and SCOPE_SCORE in json.loads(link.ags_scope or "[]"):
        # grade passback: this student's verdicts on the problem go to the link's line item, those
        # made before this launch too (the sender computes the standing; nothing is sent without one)
        service.passbacks.launched(resource_link_id=link.id, issuer=verified.issuer, sub=verified.sub, user_id=user.id)
        service.passbacks.verdict_stored(user_id=user.id, problem=verified.problem)  # senders poll each second
    sign_in(request, services, user)
    token = service.store.make_launch_token(user.id, f"/problems/{verified.problem}")
    response = RedirectResponse(f"/lti/landing?{urlencode({'token': token})}", status_code=303, headers=NO_STORE)
    response.delete_cookie(state_cookie_name(state), path="/lti/launch")
    return response


def _launches_an_admin(services: Services, verified: Any) -> bool:
    """Whether the launch's platform user already has an account that is a site admin (made so
    by `remat-judge users role`): only admins open unpublished problems, from an LMS too."""

    found = LtiStore(services.engine).lti_user(verified.issuer, verified.sub)
    user = services.users.get(found.user_id) if found is not None else None
    return user is not None and decide(services.access.principal(user), Action.PROBLEMS_MANAGE)


@router.get("/landing")
def landing(request: Request, service: LtiDep, services: ServicesDep, token: str = "") -> Response:
    """Where a launch lands: opens the problem when the session cookie came back; otherwise offers
    to open it in a new window with the one-time token (third-party cookies blocked)."""
    found = service.store.peek_launch_token(token) if token else None
    if found is None:
        return _refused(
            request,
            LaunchError(
                400, "This launch link has expired or was used already; open the activity again from the course."
            ),
        )
    user_id, target = found
    me = user_of(request, services)  # the session cookie came back and its server-side session is live
    if me is not None and me.id == user_id and service.store.use_launch_token(token) is not None:
        return RedirectResponse(target, status_code=303, headers=NO_STORE)
    user = service.store.users.get(user_id)
    return _page(
        request,
        "lti_landing.html",
        open_url=f"/lti/open?{urlencode({'token': token})}",
        name=user.display_name if user else "",
        ttl_s=LAUNCH_TOKEN_TTL_S,
    )


@router.get("/open")
def open_in_window(request: Request, service: LtiDep, services: ServicesDep, token: str = "") -> Response:
    """Exchanges a one-time launch token for a session (once, within its 2 minutes) and opens its
    problem: the fallback in a new, first-party window."""
    found = service.store.use_launch_token(token) if token else None
    user = service.store.users.get(found[0]) if found else None
    if found is None or user is None:
        return _refused(
            request,
            LaunchError(
                400, "This launch link has expired or was used already; open the activity again from the course."
            ),
        )
    sign_in(request, services, user)
    return RedirectResponse(found[1], status_code=303, headers=NO_STORE)


# --- deep linking (Deep Linking 2.0; see server/lti/deep_linking.py) -------------------------------


def _deep_linking_request(
    request: Request, services: Services, service: LtiService, platform: PlatformView, claims: dict[str, Any]
) -> Response:
    """A verified `LtiDeepLinkingRequest`: an LMS instructor (staff of the LMS context: this
    gives them no role on the judge) is signed in and sees the published problems.

    Raises:
        LaunchError(400): the deep_linking_settings claim is missing or unusable;
            LaunchError(403): the user is not an instructor of the context (nobody is signed in).
    """
    settings = deep_linking.settings_of(claims)
    if role_for(claims[CLAIM_ROLES]) != CourseRole.STAFF:
        raise LaunchError(403, "Only instructors can add the judge's problems to a course.")
    user = service.store.account_for(
        issuer=identifier(claims["iss"], "issuer"),
        sub=identifier(claims["sub"], "user (sub)"),
        name=person_name(claims),
        email=person_email(claims),
        role=CourseRole.STAFF,
    )
    sign_in(request, services, user)
    form_csrf = secrets.token_urlsafe(32)
    context = deep_linking.make_context(
        service.key,
        platform_id=platform.id,
        deployment_id=claims[deep_linking.CLAIM_DEPLOYMENT_ID],
        settings=settings,
        user_id=user.id,
        csrf=form_csrf,
    )
    problems = sorted(services.problems.all(published_only=True), key=lambda p: (p.spec.title, p.spec.slug))
    response = _page(request, "lti_deep_linking.html", problems=problems, context=context, form_csrf=form_csrf)
    response.headers["Referrer-Policy"] = "same-origin"  # the pick's POST then carries the judge's Origin
    response.set_cookie(
        deep_linking.cookie_name(form_csrf),
        form_csrf,
        max_age=deep_linking.CONTEXT_TTL_S,
        path=deep_linking.COOKIE_PATH,
        httponly=True,
        secure=service.secure(request),
        samesite="none" if service.secure(request) else "lax",
    )
    return response


@router.post("/deep-linking")
def deep_linking_pick(
    request: Request,
    service: LtiDep,
    services: ServicesDep,
    context: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form()] = "",
    problem: Annotated[str, Form()] = "",
) -> Response:
    """The instructor's pick: answers the platform with an auto-submitting form POST of the
    `LtiDeepLinkingResponse` JWT to its deep_link_return_url. 403 for a wrong CSRF token, a
    context of another session or user, expired or used already; 404 for an unknown problem."""
    _count_launch(request, service)
    try:
        if not csrf:
            raise LaunchError(
                403,
                "The form did not come from the judge's problem list; open the deep linking "
                "dialog again from the course.",
            )
        claims = deep_linking.read_context(
            service.key,
            context,
            csrf=csrf,
            cookie=request.cookies.get(deep_linking.cookie_name(csrf)),
            same_origin=_same_origin(request, service),
        )
        # the context is signed by the judge and made only for a verified launch of an LMS
        # instructor (`_deep_linking_request`): that launch's role, not a site role, allows the pick
        user = service.store.users.get(int(claims["uid"]))
        if user is None:
            raise LaunchError(403, "Only instructors can add the judge's problems to a course.")
        platform = service.store.platform_by_id(int(claims["platform"]))
        if platform is None:
            raise LaunchError(403, "This platform's registration was removed.")
        if claims["deployment"] not in platform.deployment_ids:
            raise LaunchError(403, "This deployment of the tool is no longer registered with the judge.")
        try:
            if not services.problems.is_published(problem):
                raise KeyError(problem)
            found = services.problems.get(problem)
        except (KeyError, ProblemError):
            raise LaunchError(404, "The judge has no such published problem.") from None
        if not service.store.use_nonce(
            platform.issuer, "deep-linking:" + str(claims["jti"]), until=deep_linking.spend_until(claims)
        ):
            raise LaunchError(
                403, "This problem list was used already; open the deep linking dialog again from the course."
            )
    except LaunchError as error:
        return _refused(request, error)
    token = deep_linking.response_jwt(
        service.key,
        client_id=platform.client_id,
        issuer=platform.issuer,
        deployment_id=claims["deployment"],
        data=claims.get("data"),
        title=found.spec.title,
        slug=found.spec.slug,
        base_url=service.base_url(request),
    )
    response = _page(
        request, "lti_deep_linking.html", return_url=claims["return_url"], jwt=token, title=found.spec.title
    )
    response.delete_cookie(deep_linking.cookie_name(csrf), path=deep_linking.COOKIE_PATH)
    return response
