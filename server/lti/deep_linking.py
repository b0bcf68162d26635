"""LTI Deep Linking 2.0: an instructor picks a problem in the LMS and the tool answers with a
resource link to it.

Flow:

1. The platform launches `POST /lti/launch` with an `LtiDeepLinkingRequest` (the same login
   initiation, state, nonce and id_token checks as a resource link launch). `settings_of` checks
   its `deep_linking_settings` claim (Deep Linking 2.0, 4.4.1): a `deep_link_return_url`,
   `accept_types` containing `ltiResourceLink`, and an optional `data` string. Only an instructor
   role (`server.lti.launch.role_for`) may pick: others get a 403 page and nobody is signed in.
2. The instructor is signed in (a fresh session, for a top-level window) and shown the problem
   list (`lti_deep_linking.html`). The page's form carries a random CSRF token T and a
   *context*: a short-lived JWT (10 minutes) signed with the tool's own key, holding the
   platform, the deployment, the return URL, `data`, the instructor's user id, a random `jti`,
   and SHA-256 of T. T is also set as a cookie (`remat_lti_dl_<hash of T>`, path
   `/lti/deep-linking`, HttpOnly; `SameSite=None; Secure` under `REMAT_JUDGE_COOKIE_SECURE`, so
   it comes back to the POST inside the LMS's cross-site iframe, where the `SameSite=Lax` session
   cookie does not; `SameSite=Lax` on plain HTTP). The context is so bound to this browser: the
   form posted from elsewhere lacks the cookie (CSRF) and a stolen context lacks T. No table is
   needed: the context is stateless until it is used.
3. `POST /lti/deep-linking` (csrf, context, problem) checks the CSRF token against the cookie
   and the context's binding, the context's signature and expiry, that its user is still an
   instructor, and spends its `jti` once (the `lti_nonces`
   table, key `deep-linking:<jti>`), so a replayed form is refused. It answers with an
   auto-submitting form POST of `JWT=<LtiDeepLinkingResponse>` to `deep_link_return_url`
   (Deep Linking 2.0, 4.5): signed RS256 with the tool's key (kid in the header), iss = the
   client id, aud = the platform's issuer, iat/exp (5 minutes), a fresh nonce, the deployment
   id, version 1.3.0, `data` echoed when the request carried it, and one `ltiResourceLink`
   content item: title, url `<public base>/lti/launch?problem=<slug>`, custom
   `{"problem": "<slug>"}`, and a lineItem with scoreMaximum 1 (the judge's score is 0..1),
   label = title and resourceId = slug.

The pages send no X-Frame-Options nor frame-ancestors: they open inside the LMS's iframe. The
pick is bound to the browser by a cookie (`SameSite=None; Secure` over HTTPS); a browser that
keeps no cookie in the iframe (third-party cookies blocked; its deep linking launch was bound by
platform storage) is bound by the pick's Origin instead: only the judge's own page posts from
the judge's origin (the picker page's Referrer-Policy is same-origin so that the browser sends it).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

import jwt

from server.lti.keys import ToolKey
from server.lti.launch import CLAIM_DEEP_LINKING_SETTINGS, CLAIM_DEPLOYMENT_ID, LTI, LTI_VERSION, LaunchError

DEEP_LINKING_RESPONSE = "LtiDeepLinkingResponse"
CLAIM_CONTENT_ITEMS = "https://purl.imsglobal.org/spec/lti-dl/claim/content_items"
CLAIM_DATA = "https://purl.imsglobal.org/spec/lti-dl/claim/data"
CLAIM_MSG = "https://purl.imsglobal.org/spec/lti-dl/claim/msg"
LTI_RESOURCE_LINK = "ltiResourceLink"
RESPONSE_TTL_S = 300  # the response JWT's lifetime (exp - iat)
CONTEXT_TTL_S = 600  # how long the instructor has to pick a problem
CONTEXT_AUDIENCE = "remat-judge:deep-linking-context"
COOKIE_PREFIX = "remat_lti_dl_"
COOKIE_PATH = "/lti/deep-linking"
SCORE_MAXIMUM = 1  # the judge's score is 0..1; LMSs scale the line item as they are set


@dataclass(frozen=True)
class DeepLinkingSettings:
    """The deep_linking_settings claim of a request (Deep Linking 2.0, 4.4.1)."""

    return_url: str
    data: str | None
    accept_multiple: bool


def settings_of(claims: dict[str, Any]) -> DeepLinkingSettings:
    """The checked deep linking settings of a verified `LtiDeepLinkingRequest`.

    Raises:
        LaunchError(400): no settings claim, no http(s) deep_link_return_url, accept_types that
            do not include ltiResourceLink, or a `data` that is not a string.
    """
    settings = claims.get(CLAIM_DEEP_LINKING_SETTINGS)
    if not isinstance(settings, dict):
        raise LaunchError(400, "The deep linking request carries no deep_linking_settings claim.")
    url = settings.get("deep_link_return_url")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise LaunchError(400, "The deep linking request names no deep_link_return_url.")
    accept = settings.get("accept_types")
    if not isinstance(accept, list) or LTI_RESOURCE_LINK not in accept:
        raise LaunchError(
            400,
            "The platform does not accept LTI resource links (accept_types lacks "
            "ltiResourceLink) here: the judge has nothing else to offer.",
        )
    data = settings.get("data")
    if data is not None and not isinstance(data, str):
        raise LaunchError(400, "The deep linking request's data is not a string.")
    return DeepLinkingSettings(return_url=url, data=data, accept_multiple=settings.get("accept_multiple") is True)


def binding_of(csrf: str) -> str:
    """What binds a context to a browser: SHA-256 of its CSRF token (the form's and the cookie's)."""
    return hashlib.sha256(("deep-linking:" + csrf).encode()).hexdigest()


def cookie_name(csrf: str) -> str:
    """The binding cookie of one picker (one per picker: several dialogs do not collide)."""
    return COOKIE_PREFIX + binding_of(csrf)[:16]


def make_context(
    key: ToolKey, *, platform_id: int, deployment_id: str, settings: DeepLinkingSettings, user_id: int, csrf: str
) -> str:
    """The signed, short-lived context the picker form carries (see the module docstring)."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "aud": CONTEXT_AUDIENCE,
        "iat": now,
        "exp": now + CONTEXT_TTL_S,
        "jti": secrets.token_urlsafe(24),
        "platform": platform_id,
        "deployment": deployment_id,
        "return_url": settings.return_url,
        "uid": user_id,
        "bind": binding_of(csrf),
    }
    if settings.data is not None:
        claims["data"] = settings.data
    return key.sign(claims)


def read_context(
    key: ToolKey, context: str, *, csrf: str, cookie: str | None, same_origin: bool = False
) -> dict[str, Any]:
    """The claims of a picker form's context, checked: the form's CSRF token equals the
    context's binding and the browser's binding cookie (or, when the browser kept no cookie in
    the LMS's iframe, the form was posted from the judge's own page: `same_origin`, from the
    request's Origin); signature (the tool's key), audience, expiry.

    Raises:
        LaunchError(403): any check fails.
    """
    try:
        claims = jwt.decode(
            context,
            key.private_key.public_key(),
            algorithms=["RS256"],
            audience=CONTEXT_AUDIENCE,
            options={"require": ["exp", "iat", "jti", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise LaunchError(
            403, "The problem list has expired; open the deep linking dialog again from the course."
        ) from None
    except jwt.InvalidTokenError:
        raise LaunchError(403, "The problem list's form is not valid; open the deep linking dialog again.") from None
    bound = (cookie is not None and secrets.compare_digest(cookie, csrf)) or (cookie is None and same_origin)
    if not csrf or not bound or not secrets.compare_digest(str(claims.get("bind", "")), binding_of(csrf)):
        raise LaunchError(
            403,
            "This problem list was opened in another browser session (or this browser blocks "
            "the judge's cookies); open the deep linking dialog again from the course.",
        )
    return claims


def response_jwt(
    key: ToolKey,
    *,
    client_id: str,
    issuer: str,
    deployment_id: str,
    data: str | None,
    title: str,
    slug: str,
    base_url: str,
) -> str:
    """The `LtiDeepLinkingResponse` JWT with one ltiResourceLink to the problem `slug`."""
    now = int(time.time())
    item = {
        "type": LTI_RESOURCE_LINK,
        "title": title,
        "url": f"{base_url}/lti/launch?{urlencode({'problem': slug})}",
        "custom": {"problem": slug},
        "lineItem": {"scoreMaximum": SCORE_MAXIMUM, "label": title, "resourceId": slug},
    }
    claims: dict[str, Any] = {
        "iss": client_id,
        "aud": issuer,
        "iat": now,
        "exp": now + RESPONSE_TTL_S,
        "nonce": secrets.token_urlsafe(24),
        LTI + "message_type": DEEP_LINKING_RESPONSE,
        LTI + "version": LTI_VERSION,
        CLAIM_DEPLOYMENT_ID: deployment_id,
        CLAIM_CONTENT_ITEMS: [item],
        CLAIM_MSG: f"Added {title}",
    }
    if data is not None:
        claims[CLAIM_DATA] = data
    return key.sign(claims)


def spend_until(claims: dict[str, Any]) -> datetime:
    """Until when a context's jti must be remembered (its expiry plus a minute)."""
    return datetime.fromtimestamp(int(claims["exp"]), UTC) + timedelta(seconds=60)
