"""What an LTI 1.3 launch says, free of HTTP and database: the claims' names, the verified
launch (`Launch`, `launch_of`), the user's role, the problem it opens, the context, the roster
and AGS services it offers.

The id_token's signature and claims are verified first (`server.lti.id_token.verify_id_token`).
Every refusal raises `LaunchError` with an HTTP status (4xx) and a sentence for the person
launching; nothing here signs anyone in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from server.platform.text import display_text, storable
from server.store.courses import CourseRole

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
CLAIM_MESSAGE_TYPE = LTI + "message_type"
CLAIM_VERSION = LTI + "version"
CLAIM_DEPLOYMENT_ID = LTI + "deployment_id"
CLAIM_TARGET_LINK_URI = LTI + "target_link_uri"
CLAIM_RESOURCE_LINK = LTI + "resource_link"
CLAIM_ROLES = LTI + "roles"
CLAIM_CONTEXT = LTI + "context"
CLAIM_CUSTOM = LTI + "custom"
CLAIM_AGS_ENDPOINT = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
CLAIM_NRPS = (
    "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"  # LTI NRPS 2.0, "Names and Role Service claim"
)
RESOURCE_LINK_REQUEST = "LtiResourceLinkRequest"
DEEP_LINKING_REQUEST = "LtiDeepLinkingRequest"  # Deep Linking 2.0, 4.4
CLAIM_DEEP_LINKING_SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
LTI_VERSION = "1.3.0"
PROBLEM_SLUG = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
# LIS roles (LTI 1.3 Core A.2) that make a user staff of the launch's course: context roles
# Instructor (and every sub-role of it, such as TeachingAssistant), Administrator,
# ContentDeveloper; the institution's and the system's Administrator. None of them gives a role
# on the judge itself (`server.authz`).
_INSTRUCTOR_CONTEXT_ROLES = {"Instructor", "Administrator", "ContentDeveloper", "TeachingAssistant"}
_INSTRUCTOR_ROLE_URIS = {LIS + "institution/person#Administrator", LIS + "system/person#Administrator"}


class LaunchError(Exception):
    """A refused login or launch.

    Attributes:
        status_code: the HTTP status to answer with (400 malformed, 403 refused, 404 unknown problem).
        message: what went wrong, in words for the person launching (no secret, no token).
    """

    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code, self.message = status_code, message


@dataclass(frozen=True)
class Launch:
    """A verified resource link launch.

    Attributes:
        claims: every claim of the id_token.
        issuer, sub: who the user is on the platform (the account key).
        deployment_id, resource_link_id: where the launch came from.
        problem: the problem slug to open.
        role: the course role the LTI roles map to (staff or student of the launch's context).
        name, email: the user's, when the platform sends them.
        context_id, context_title: the course (context claim, LTI 1.3 Core 5.4.1; title, else label).
        title: the resource link's title.
        ags: the AGS endpoint claim (scope, lineitems, lineitem) or None.
        memberships_url: the context's NRPS 2.0 memberships URL (`memberships_url_of`) or None.
    """

    claims: dict[str, Any]
    issuer: str
    sub: str
    deployment_id: str
    resource_link_id: str
    problem: str
    role: CourseRole
    name: str | None = None
    email: str | None = None
    context_id: str | None = None
    context_title: str | None = None
    title: str | None = None
    ags: dict[str, Any] | None = field(default=None)
    memberships_url: str | None = None


def role_for(roles: list[Any]) -> CourseRole:
    """The course role of a user with these LTI roles in the launch's context: staff for
    Instructor (and its sub-roles such as `membership/Instructor#TeachingAssistant`),
    Administrator, ContentDeveloper or TeachingAssistant in the LIS membership vocabulary, or the
    institution's or system's Administrator; student otherwise. Simple names ("Instructor") count
    as context roles (LTI 1.3 Core 5.3.7 lets platforms send them for backward compatibility).
    Never a site role: an LMS instructor of one course is staff of that course only."""
    for role in roles:
        if not isinstance(role, str):
            continue
        if role in _INSTRUCTOR_ROLE_URIS or role in _INSTRUCTOR_CONTEXT_ROLES:
            return CourseRole.STAFF
        if role.startswith(LIS + "membership"):
            rest = role[len(LIS + "membership") :]  # "#Instructor" or "/Instructor#TeachingAssistant"
            principal, _, sub_role = rest.lstrip("#/").partition("#")
            if principal in _INSTRUCTOR_CONTEXT_ROLES or sub_role in _INSTRUCTOR_CONTEXT_ROLES:
                return CourseRole.STAFF
    return CourseRole.STUDENT


def problem_of(claims: dict[str, Any]) -> str:
    """The problem a launch opens: the custom claim `problem`, else the `problem` query parameter
    of the target_link_uri claim (`<tool>/lti/launch?problem=<slug>`).

    Raises:
        LaunchError(400): neither names a problem, or the name is not a slug.
    """
    custom = claims.get(CLAIM_CUSTOM)
    slug = custom.get("problem") if isinstance(custom, dict) else None
    if not slug:
        target = claims.get(CLAIM_TARGET_LINK_URI)
        if isinstance(target, str):
            slug = next(iter(parse_qs(urlsplit(target).query).get("problem", [])), None)
    if not isinstance(slug, str) or not PROBLEM_SLUG.match(slug):
        raise LaunchError(
            400,
            "This link does not name a problem: set the custom parameter problem=<slug> "
            "or end the link with /lti/launch?problem=<slug>.",
        )
    return slug


def _text(claim: Any, name: str) -> str | None:
    """`claim[name]` fit to store (`display_text`), when `claim` is an object, else None."""
    return display_text(claim.get(name)) if isinstance(claim, dict) else None


def identifier(value: Any, what: str) -> str:
    """A platform identifier (sub, deployment, context, resource link id) as the judge stores it.

    Raises:
        LaunchError(400): not a non-empty string of at most 255 storable characters (LTI 1.3
            Core 5.3.5 and 5.4.1 bound these ids at 255 ASCII characters).
    """
    if not isinstance(value, str) or not value or len(value) > 255 or not storable(value):
        raise LaunchError(400, f"The launch's {what} is not an identifier the judge can store.")
    return value


def launch_of(claims: dict[str, Any]) -> Launch:
    """The launch a verified id_token's claims describe.

    Raises:
        LaunchError(400): it names no problem.
    """
    link = claims[CLAIM_RESOURCE_LINK]
    ags = claims.get(CLAIM_AGS_ENDPOINT)
    context_id, context_title = context_of(claims)
    return Launch(
        claims=claims,
        issuer=identifier(claims["iss"], "issuer"),
        sub=identifier(claims["sub"], "user (sub)"),
        deployment_id=identifier(claims[CLAIM_DEPLOYMENT_ID], "deployment id"),
        resource_link_id=identifier(link["id"], "resource link id"),
        problem=problem_of(claims),
        role=role_for(claims[CLAIM_ROLES]),
        name=person_name(claims),
        email=person_email(claims),
        context_id=context_id,
        context_title=context_title,
        title=display_text(link.get("title")),
        ags=_ags_endpoint(ags),
        memberships_url=memberships_url_of(claims),
    )


def context_of(claims: dict[str, Any]) -> tuple[str | None, str | None]:
    """(id, title) of the launch's context claim (LTI 1.3 Core 5.4.1; the title, else the
    label), or (None, None) without one. Resource link and deep linking launches alike.

    Raises:
        LaunchError(400): the context's id is not an identifier the judge can store.
    """
    context = claims.get(CLAIM_CONTEXT)
    context_id = context.get("id") if isinstance(context, dict) else None
    if context_id is None:
        return None, None
    return identifier(context_id, "context id"), _text(context, "title") or _text(context, "label")


def memberships_url_of(claims: dict[str, Any]) -> str | None:
    """The context's memberships URL from the Names and Role Provisioning Services claim (LTI
    NRPS 2.0, its service claim: `context_memberships_url`, with "2.0" among its
    `service_versions`), or None when the launch carries none, offers another version only, or
    the URL is not an http(s) URL of at most 2,000 storable characters. Never raises: a launch
    without a usable roster service is still a launch."""
    claim = claims.get(CLAIM_NRPS)
    if not isinstance(claim, dict):
        return None
    url, versions = claim.get("context_memberships_url"), claim.get("service_versions")
    if not isinstance(versions, list) or "2.0" not in versions:
        return None
    if not isinstance(url, str) or len(url) > 2000 or not storable(url):
        return None
    return url if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc else None


def _ags_endpoint(claim: Any) -> dict[str, Any] | None:
    """The AGS endpoint claim (AGS 3.1) as the judge keeps it: `lineitem` and `lineitems` when
    they are storable strings, `scope` as its storable strings; None when it is not an object."""
    if not isinstance(claim, dict):
        return None
    kept: dict[str, Any] = {
        k: claim[k]
        for k in ("lineitem", "lineitems")
        if isinstance(claim.get(k), str) and storable(claim[k]) and len(claim[k]) <= 2000
    }
    scope = claim.get("scope")
    kept["scope"] = [s for s in scope if isinstance(s, str) and storable(s)] if isinstance(scope, list) else []
    return kept


def person_name(claims: dict[str, Any]) -> str | None:
    """The user's name from the OpenID Connect claims (`name`, else given and family names)."""
    name = claims.get("name")
    if not isinstance(name, str) or not name:
        name = " ".join(p for p in (claims.get("given_name"), claims.get("family_name")) if isinstance(p, str) and p)
    return display_text(name, limit=80)


def person_email(claims: dict[str, Any]) -> str | None:
    """The user's email from the claims, lower-cased, or None (absent or not storable)."""
    email = display_text(claims.get("email"), limit=254)
    return email.lower() if email and "@" in email else None
