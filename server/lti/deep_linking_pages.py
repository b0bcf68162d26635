"""Deep Linking 2.0 routes: a verified `LtiDeepLinkingRequest` from an instructor shows the
problems (`deep_linking_request`, reached from `/lti/launch`); `POST /lti/deep-linking` answers
the platform with the signed `LtiDeepLinkingResponse` (`server.lti.deep_linking` builds it)."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from graders.problems.spec import ProblemError
from server.deps import ServicesDep
from server.lti import deep_linking
from server.lti.launch import (
    CLAIM_ROLES,
    LaunchError,
    identifier,
    person_email,
    person_name,
    role_for,
)
from server.lti.lti_pages import count_launch, enter_context, from_same_origin, lti_page, refusal_page
from server.lti.service import LtiDep, LtiService
from server.services import Services
from server.store.courses import CourseRole
from server.store.lti import PlatformView
from server.web.sessions import sign_in

router = APIRouter(prefix="/lti", include_in_schema=False)


def deep_linking_request(
    request: Request, services: Services, service: LtiService, platform: PlatformView, claims: dict[str, Any]
) -> Response:
    """A verified `LtiDeepLinkingRequest`: an LMS instructor (staff of the LMS context: this
    gives them no role on the judge) is signed in, made staff of the context's course as a
    resource link launch would (`enter_context`: the instructor pages answer at once), and sees
    the published problems.

    Raises:
        LaunchError(400): the deep_linking_settings claim is missing or unusable, or the context
            id is not storable; LaunchError(403): the user is not an instructor of the context
            (nobody is signed in, nobody enrolled).
    """
    settings = deep_linking.settings_of(claims)
    if role_for(claims[CLAIM_ROLES]) != CourseRole.STAFF:
        raise LaunchError(403, "Only instructors can add the judge's problems to a course.")
    deployment_id = identifier(claims[deep_linking.CLAIM_DEPLOYMENT_ID], "deployment id")
    user = service.store.account_for(
        issuer=identifier(claims["iss"], "issuer"),
        sub=identifier(claims["sub"], "user (sub)"),
        name=person_name(claims),
        email=person_email(claims),
        role=CourseRole.STAFF,
    )
    enter_context(
        service,
        platform_id=platform.id,
        deployment_id=deployment_id,
        claims=claims,
        user_id=user.id,
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
    response = lti_page(request, "lti_deep_linking.html", problems=problems, context=context, form_csrf=form_csrf)
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


def _pick_context(request: Request, service: LtiService, context: str, csrf: str) -> dict[str, Any]:
    """The claims of the pick's signed context (`deep_linking.read_context`: its CSRF token, the
    matching cookie, the same origin).

    Raises:
        LaunchError(403): no CSRF token, or the context does not check out.
    """
    if not csrf:
        raise LaunchError(
            403,
            "The form did not come from the judge's problem list; open the deep linking dialog again from the course.",
        )
    return deep_linking.read_context(
        service.key,
        context,
        csrf=csrf,
        cookie=request.cookies.get(deep_linking.cookie_name(csrf)),
        same_origin=from_same_origin(request, service),
    )


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
    count_launch(request, service)
    try:
        claims = _pick_context(request, service, context, csrf)
        # the context is signed by the judge and made only for a verified launch of an LMS
        # instructor (`deep_linking_request`): that launch's role, not a site role, allows the pick
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
        return refusal_page(request, error)
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
    response = lti_page(
        request, "lti_deep_linking.html", return_url=claims["return_url"], jwt=token, title=found.spec.title
    )
    response.delete_cookie(deep_linking.cookie_name(csrf), path=deep_linking.COOKIE_PATH)
    return response
