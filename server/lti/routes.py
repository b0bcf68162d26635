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
   checks the browser binding, verifies the id_token (`server.lti.id_token.verify_id_token`),
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

Modules: `server.lti.login` (step 1), this one (steps 2 and 3), `server.lti.deep_linking_pages`
(step 4's routes), `server.lti.lti_pages` (what they share).
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from graders.problems.spec import ProblemError
from server.authz import Action, decide
from server.deps import ServicesDep
from server.lti.ags import SCOPE_SCORE
from server.lti.deep_linking_pages import deep_linking_request
from server.lti.id_token import LEEWAY_S, verify_id_token
from server.lti.launch import (
    CLAIM_MESSAGE_TYPE,
    DEEP_LINKING_REQUEST,
    RESOURCE_LINK_REQUEST,
    Launch,
    LaunchError,
    launch_of,
)
from server.lti.login import STATE_COOKIE_PREFIX, state_cookie_name, storage_key
from server.lti.lti_pages import NO_STORE, enter_context, from_same_origin, lti_page, origin_of, refusal_page
from server.lti.service import LtiDep, LtiService
from server.services import Services
from server.store.courses import CourseRole
from server.store.lti import LAUNCH_TOKEN_TTL_S, PendingLogin, PlatformView, sha256_hex
from server.web.sessions import sign_in, user_of

router = APIRouter(prefix="/lti", include_in_schema=False)


@router.get("/jwks")
def jwks(request: Request, service: LtiDep) -> JSONResponse:
    """The tool's public JWK Set (RFC 7517): platforms verify the tool's JWTs with it."""
    return JSONResponse(service.key.jwks(), headers={"Cache-Control": "public, max-age=300"})


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
        cookie = _state_cookie(request, state, id_token)
        if cookie is None:
            page = _storage_read_back(request, service, state, id_token)
            if page is not None:
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
        response = refusal_page(request, error)
        if state:
            response.delete_cookie(state_cookie_name(state), path="/lti/launch")
        return response


def _state_cookie(request: Request, state: str, id_token: str) -> str | None:
    """The launch's state cookie when this browser sent it, checked against the state, else None.

    Raises:
        LaunchError(400): no state or no id_token; LaunchError(403): the cookie is another
            login's, or the browser keeps state cookies but none for this state (login CSRF).
    """
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
    return cookie


def _storage_read_back(request: Request, service: LtiService, state: str, id_token: str) -> Response | None:
    """For a launch without its cookie whose login used the platform's postMessage storage: the
    page that reads the binding back from that storage and posts it to `/lti/launch/storage`
    (the login is not consumed). None when the login used no storage or its platform is gone."""
    pending = service.store.peek_login(state)
    if pending is not None and pending.storage_target:
        platform = service.store.platform_by_id(pending.platform_id)
        origin = origin_of(platform.auth_login_url) if platform is not None else None
        if origin is not None:  # read the binding back from the platform's storage, then go on
            page = lti_page(
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
    return None


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
        if not from_same_origin(request, service):
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
        return refusal_page(request, error)


def _relaunch(request: Request, login: PendingLogin, why: str) -> HTMLResponse:
    """A 403 that signs nobody in and offers the same login again in a new, first-party window,
    where the judge's state cookie comes back with the launch."""
    url = (
        f"/lti/login?{urlencode(login.relaunch)}"
        if login.relaunch.get("iss") and login.relaunch.get("login_hint")
        else None
    )
    return lti_page(request, "lti_relaunch.html", status_code=403, code=403, detail=why, relaunch_url=url)


def _verified_launch(
    request: Request, services: Services, service: LtiService, state: str, id_token: str, login: PendingLogin
) -> Response:
    """The launch once its state is bound to this browser: verifies the id_token and signs in.

    Raises:
        LaunchError: see `launch`.
    """
    platform = service.store.platform_by_id(login.platform_id)
    if platform is None:
        raise LaunchError(403, "This platform's registration was removed.")
    claims = _verified_claims(service, platform, id_token, login.nonce)
    if claims[CLAIM_MESSAGE_TYPE] == DEEP_LINKING_REQUEST:
        response = deep_linking_request(request, services, service, platform, claims)
        response.delete_cookie(state_cookie_name(state), path="/lti/launch")
        return response
    verified = launch_of(claims)
    _check_problem(services, service, verified)
    user = service.store.account_for(
        issuer=verified.issuer, sub=verified.sub, name=verified.name, email=verified.email, role=verified.role
    )  # never a site role
    _record_launch(service, platform, verified, user.id)
    sign_in(request, services, user)
    token = service.store.make_launch_token(user.id, f"/problems/{verified.problem}")
    response = RedirectResponse(f"/lti/landing?{urlencode({'token': token})}", status_code=303, headers=NO_STORE)
    response.delete_cookie(state_cookie_name(state), path="/lti/launch")
    return response


def _verified_claims(service: LtiService, platform: PlatformView, id_token: str, nonce: str) -> dict[str, Any]:
    """The id_token's claims once it verifies against `platform` and this login's nonce
    (`verify_id_token`: a resource link or deep linking launch), its nonce remembered so the
    launch is used once.

    Raises:
        LaunchError: a failed check, or a nonce seen before.
    """
    claims = verify_id_token(
        id_token,
        issuer=platform.issuer,
        client_id=platform.client_id,
        deployment_ids=platform.deployment_ids,
        expected_nonce=nonce,
        key_for=lambda kid: service.jwks.key(platform.keyset_url, kid),
        message_types=(RESOURCE_LINK_REQUEST, DEEP_LINKING_REQUEST),
    )
    until = datetime.fromtimestamp(int(claims["exp"]), UTC) + timedelta(seconds=LEEWAY_S)
    if not service.store.use_nonce(platform.issuer, claims["nonce"], until=until):
        raise LaunchError(403, "This launch was used already (its nonce was seen before).")
    return claims


def _check_problem(services: Services, service: LtiService, verified: Launch) -> None:
    """Raises `LaunchError(404)` when the launch's problem is unknown, or unpublished and the
    platform user is not a site admin."""
    try:
        services.problems.get(verified.problem)
    except (KeyError, ProblemError):
        raise LaunchError(
            404, f"The course links to a problem the judge does not have: {verified.problem!r}."
        ) from None
    if not services.problems.is_published(verified.problem) and not _launches_an_admin(services, service, verified):
        who = "an admin of the judge publishes it" if verified.role == CourseRole.STAFF else "ask your instructor"
        raise LaunchError(404, f"The problem {verified.problem!r} is not published yet; {who}.")


def _record_launch(service: LtiService, platform: PlatformView, verified: Launch, user_id: int) -> None:
    """What a verified launch of `user_id` leaves behind: its resource link (with the AGS
    endpoint), the LMS course's enrollment and assignment, and, for a student whose link takes
    scores, the grade passback."""
    link = service.store.save_resource_link(
        platform_id=platform.id,
        deployment_id=verified.deployment_id,
        resource_link_id=verified.resource_link_id,
        context_id=verified.context_id,
        title=verified.title,
        problem=verified.problem,
        ags=verified.ags,
    )
    course = enter_context(  # the LMS course: enrollment, its roster service
        service,
        platform_id=platform.id,
        deployment_id=verified.deployment_id,
        claims=verified.claims,
        user_id=user_id,
        role=verified.role,
    )
    if course is not None:  # and the link's problem as an assignment
        service.courses.ensure_assignment(course.id, verified.problem)
    if verified.role == CourseRole.STUDENT and link.ags_lineitem and SCOPE_SCORE in json.loads(link.ags_scope or "[]"):
        # grade passback: this student's verdicts on the problem go to the link's line item, those
        # made before this launch too (the sender computes the standing; nothing is sent without one)
        service.passbacks.launched(resource_link_id=link.id, issuer=verified.issuer, sub=verified.sub, user_id=user_id)
        service.passbacks.verdict_stored(user_id=user_id, problem=verified.problem)  # senders poll each second


def _launches_an_admin(services: Services, service: LtiService, verified: Any) -> bool:
    """Whether the launch's platform user already has an account that is a site admin (made so
    by `remat-judge users role`): only admins open unpublished problems, from an LMS too."""

    found = service.store.lti_user(verified.issuer, verified.sub)
    user = services.users.get(found.user_id) if found is not None else None
    return user is not None and decide(services.access.principal(user), Action.PROBLEMS_MANAGE)


@router.get("/landing")
def landing(request: Request, service: LtiDep, services: ServicesDep, token: str = "") -> Response:
    """Where a launch lands: opens the problem when the session cookie came back; otherwise offers
    to open it in a new window with the one-time token (third-party cookies blocked)."""
    found = service.store.peek_launch_token(token) if token else None
    if found is None:
        return refusal_page(
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
    return lti_page(
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
        return refusal_page(
            request,
            LaunchError(
                400, "This launch link has expired or was used already; open the activity again from the course."
            ),
        )
    sign_in(request, services, user)
    return RedirectResponse(found[1], status_code=303, headers=NO_STORE)
