"""LTI Dynamic Registration 1.0 (1EdTech): one URL instead of ten fields copied by hand.

1. An admin makes a one-time registration URL (`remat-judge lti registration-url`, or the button
   on `/lti/setup`): `<base>/lti/dynamic-registration/<token>`, valid for a while
   (`RegistrationStore.issue`; the token is 256 random bits, stored as its SHA-256).
2. The platform's administrator pastes it into the LMS (Moodle: "Register tool" with the tool URL),
   which opens it in a frame or window with `openid_configuration` (its OpenID configuration URL)
   and usually `registration_token`.
3. The judge fetches that configuration (within the allowed networks: `server.lti.lms_http`'s pinned,
   no-redirect client), checks that its `issuer` is the origin the configuration came from and
   that it has the endpoints LTI needs, then POSTs its tool configuration to the platform's
   `registration_endpoint` with the token as bearer: redirect URI `<base>/lti/launch`, login
   initiation `<base>/lti/login`, the JWKS URL, the LTI tool configuration claim (resource link
   and deep linking messages), the AGS scopes and the NRPS roster scope.
4. The platform answers with the client id (and in the tool configuration claim, the deployment
   id); the judge registers the platform (`LtiStore.register`) and answers a page that posts
   `{subject: "org.imsglobal.lti.close"}` to its opener or parent, which closes the dialog.

A used or expired URL registers nothing. Canvas does not speak Dynamic Registration; it takes a
JSON configuration by URL instead (`canvas_configuration`, served at `/lti/canvas.json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from server.lti.ags import SCOPE_LINEITEM, SCOPE_RESULT_READONLY, SCOPE_SCORE, AgsClient
from server.lti.lms_http import AgsRefused
from server.lti.nrps import SCOPE_MEMBERSHIPS

TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
CLOSE_MESSAGE = {"subject": "org.imsglobal.lti.close"}
TOOL_NAME = "remat-judge"


class RegistrationError(Exception):
    """A registration that cannot go on; the message says why, for the platform's administrator
    (no secret, no token)."""


@dataclass(frozen=True)
class PlatformConfiguration:
    """What the judge keeps of a platform's OpenID configuration (Dynamic Registration 3.4)."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    registration_endpoint: str
    product: str


def _https_or_allowed(url: str, what: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise RegistrationError(f"the platform's {what} is not an http(s) URL")
    return url


def fetch_configuration(client: AgsClient, url: str) -> PlatformConfiguration:
    """GETs and checks the platform's OpenID configuration at `url`.

    Raises:
        RegistrationError: unreachable or refused (a private address outside the allowed LTI
            networks says which network to add), not JSON, an `issuer` whose origin is not the
            configuration URL's, or a missing endpoint.
    """
    _https_or_allowed(url, "openid_configuration")
    try:
        answer = client.request("GET", url, headers={"Accept": "application/json"})
    except AgsRefused as exc:
        raise RegistrationError(f"the judge does not call {urlsplit(url).hostname}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - connection errors, time-outs: said, not raised
        raise RegistrationError(f"the platform's configuration could not be fetched ({type(exc).__name__})") from None
    if answer.status_code != 200:
        raise RegistrationError(f"the platform's configuration URL answered {answer.status_code}")
    try:
        data = json.loads(answer.body)
        if not isinstance(data, dict):
            raise ValueError
    except ValueError:
        raise RegistrationError("the platform's configuration is not a JSON object") from None
    issuer = data.get("issuer")
    if not isinstance(issuer, str) or not issuer:
        raise RegistrationError("the platform's configuration names no issuer")
    given, fetched = urlsplit(issuer), urlsplit(url)
    if (given.scheme, given.hostname, given.port) != (fetched.scheme, fetched.hostname, fetched.port):
        raise RegistrationError(
            f"the configuration's issuer {issuer!r} is not the site it was fetched from "
            f"({fetched.scheme}://{fetched.netloc})"
        )
    fields: dict[str, str] = {}
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri", "registration_endpoint"):
        value = data.get(name)
        if not isinstance(value, str) or not value:
            raise RegistrationError(f"the platform's configuration has no {name}")
        fields[name] = _https_or_allowed(value, name)
    offered = data.get(PLATFORM_CONFIGURATION)
    platform: dict[str, object] = offered if isinstance(offered, dict) else {}
    product = str(platform.get("product_family_code") or "")[:64]
    return PlatformConfiguration(issuer=issuer, product=product, **fields)


def tool_configuration(base_url: str) -> dict[str, Any]:
    """The client registration the judge sends (Dynamic Registration 3.5; OpenID Connect Dynamic
    Client Registration with the LTI tool configuration claim)."""
    host = urlsplit(base_url).hostname or ""
    return {
        "application_type": "web",
        "response_types": ["id_token"],
        "grant_types": ["implicit", "client_credentials"],
        "initiate_login_uri": f"{base_url}/lti/login",
        "redirect_uris": [f"{base_url}/lti/launch"],
        "client_name": TOOL_NAME,
        "jwks_uri": f"{base_url}/lti/jwks",
        "logo_uri": f"{base_url}/static/favicon.svg",
        "token_endpoint_auth_method": "private_key_jwt",
        "scope": " ".join([SCOPE_SCORE, SCOPE_LINEITEM, SCOPE_RESULT_READONLY, SCOPE_MEMBERSHIPS]),
        TOOL_CONFIGURATION: {
            "domain": host,
            "target_link_uri": f"{base_url}/lti/launch",
            "description": "An online judge for JAX gradient-checkpointing exercises.",
            "claims": ["iss", "sub", "name", "given_name", "family_name", "email"],
            "messages": [
                {"type": "LtiResourceLinkRequest", "target_link_uri": f"{base_url}/lti/launch"},
                {
                    "type": "LtiDeepLinkingRequest",
                    "target_link_uri": f"{base_url}/lti/launch",
                    "label": "remat-judge problems",
                    "placements": ["ContentArea", "link_selection", "assignment_selection"],
                },
            ],
        },
    }


def register_with(
    client: AgsClient, configuration: PlatformConfiguration, base_url: str, registration_token: str | None
) -> tuple[str, str | None]:
    """POSTs the tool configuration to the platform's registration endpoint.

    Returns:
        (client id, deployment id or None) from the platform's answer.

    Raises:
        RegistrationError: refused or unreachable, or an answer without a client id.
    """
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if registration_token:
        headers["Authorization"] = f"Bearer {registration_token}"
    body = json.dumps(tool_configuration(base_url)).encode("utf-8")
    try:
        answer = client.request("POST", configuration.registration_endpoint, headers=headers, content=body)
    except AgsRefused as exc:
        raise RegistrationError(f"the judge does not call the registration endpoint: {exc}") from None
    except Exception as exc:  # noqa: BLE001
        raise RegistrationError(f"the registration request failed ({type(exc).__name__})") from None
    if not 200 <= answer.status_code < 300:
        said = answer.body[:300].decode("utf-8", "replace")
        raise RegistrationError(f"the platform refused the registration ({answer.status_code}): {said}")
    try:
        data = json.loads(answer.body)
        client_id = data["client_id"]
        if not isinstance(client_id, str) or not client_id or len(client_id) > 255:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise RegistrationError("the platform's answer holds no client_id") from None
    tool = data.get(TOOL_CONFIGURATION) if isinstance(data.get(TOOL_CONFIGURATION), dict) else {}
    deployment = tool.get("deployment_id")
    return client_id, deployment if isinstance(deployment, str) and deployment and len(deployment) <= 255 else None


def canvas_configuration(base_url: str) -> dict[str, Any]:
    """Canvas's developer key JSON ("Enter URL": `<base>/lti/canvas.json`): the same URLs and
    scopes as a dynamic registration, in Canvas's own format."""
    host = urlsplit(base_url).hostname or ""
    return {
        "title": TOOL_NAME,
        "description": "An online judge for JAX gradient-checkpointing exercises.",
        "oidc_initiation_url": f"{base_url}/lti/login",
        "target_link_uri": f"{base_url}/lti/launch",
        "public_jwk_url": f"{base_url}/lti/jwks",
        "scopes": [SCOPE_SCORE, SCOPE_LINEITEM, SCOPE_RESULT_READONLY, SCOPE_MEMBERSHIPS],
        "extensions": [
            {
                "domain": host,
                "tool_id": TOOL_NAME,
                "platform": "canvas.instructure.com",
                "privacy_level": "public",
                "settings": {
                    "text": TOOL_NAME,
                    "placements": [
                        {
                            "placement": "link_selection",
                            "message_type": "LtiDeepLinkingRequest",
                            "target_link_uri": f"{base_url}/lti/launch",
                        },
                        {
                            "placement": "assignment_selection",
                            "message_type": "LtiDeepLinkingRequest",
                            "target_link_uri": f"{base_url}/lti/launch",
                        },
                    ],
                },
            }
        ],
        "custom_fields": {},
    }
