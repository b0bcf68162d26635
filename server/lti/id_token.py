"""Verification of an LTI 1.3 launch's id_token, free of HTTP routes and database: its signing
key (`JwksCache`, the platforms' JWK Sets), signature and claims (`verify_id_token`).

Follows IMS Security Framework 1.0, 5.1.3 "Authentication Response Validation" (every numbered
step is marked below) and LTI 1.3 Core 5.3 (required claims of a resource link launch). Every
refusal raises `server.lti.launch.LaunchError` with an HTTP status (4xx) and a sentence for the
person launching; nothing here signs anyone in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jwt

from server.lti.launch import (
    CLAIM_DEPLOYMENT_ID,
    CLAIM_MESSAGE_TYPE,
    CLAIM_RESOURCE_LINK,
    CLAIM_ROLES,
    CLAIM_VERSION,
    LTI_VERSION,
    RESOURCE_LINK_REQUEST,
    LaunchError,
)

ALGORITHM = "RS256"  # the only algorithm accepted (Security Framework 5.1.3 step 6; 6.1)
LEEWAY_S = 30  # clock skew allowed on exp and iat, seconds


class JwksCache:
    """The platforms' signing keys, fetched from their keyset URLs and looked up by `kid` (PyJWT's
    `PyJWKClient`, one per URL). Thread-safe.

    The JWK Set is cached for `lifespan_s`; an unknown kid makes it fetch the set again at once
    (a platform's key rotation needs no restart), at most once per `refetch_cooldown_s` per
    platform, so launches with made-up kids cannot make the judge hammer the platform. Keys are
    not cached beyond the set (PyJWT's per-kid cache never expires: a key the platform withdrew
    would stay trusted).

    Args:
        lifespan_s: seconds a fetched JWK Set is used before it is fetched again.
        timeout_s: seconds one fetch may take.
        refetch_cooldown_s: seconds after a fetch before an unknown kid triggers another.
    """

    def __init__(self, *, lifespan_s: float = 300.0, timeout_s: float = 10.0, refetch_cooldown_s: float = 10.0):
        self._clients: dict[str, jwt.PyJWKClient] = {}
        self._lock = threading.Lock()
        self.lifespan_s, self.timeout_s, self.refetch_cooldown_s = lifespan_s, timeout_s, refetch_cooldown_s

    def key(self, keyset_url: str, kid: str) -> Any:
        """The public key with this `kid` in the platform's JWK Set.

        Raises:
            LaunchError(403): no such key (after one fresh fetch), or the JWK Set cannot be fetched.
        """
        with self._lock:
            client = self._clients.get(keyset_url)
            if client is None:
                client = self._clients[keyset_url] = jwt.PyJWKClient(
                    keyset_url,
                    cache_keys=False,
                    cache_jwk_set=True,
                    lifespan=self.lifespan_s,
                    timeout=self.timeout_s,
                    cooldown_duration=self.refetch_cooldown_s,
                )
        try:
            signing_key = client.get_signing_key(kid)
        except jwt.PyJWKClientConnectionError:
            raise LaunchError(403, "The judge could not fetch the platform's public keys; try again later.") from None
        except jwt.PyJWKClientError:
            raise LaunchError(403, "The launch was signed with a key the platform does not publish.") from None
        if signing_key.key_type != "RSA":
            raise LaunchError(403, "The platform's key for this launch is not an RSA key.")
        return signing_key.key


def _signing_kid(id_token: str) -> str:
    """The `kid` of the key that signed `id_token`, read from its unverified header.

    Raises:
        LaunchError(400): not a JWT; LaunchError(403): not RS256, or no kid.
    """
    try:
        header = jwt.get_unverified_header(id_token)
    except jwt.DecodeError:
        raise LaunchError(400, "The launch did not carry a readable id_token.") from None
    if header.get("alg") != ALGORITHM:  # step 6: RS256 only, never "none" nor HMAC
        raise LaunchError(403, f"The launch's id_token is signed with {header.get('alg')!r}; only RS256 is accepted.")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise LaunchError(403, "The launch's id_token names no signing key (kid).")
    return kid


def _decoded_claims(id_token: str, key: Any, *, issuer: str, client_id: str, leeway_s: float) -> dict[str, Any]:
    """The claims of `id_token` once its signature, issuer, audience, exp and iat verify.

    Raises:
        LaunchError(403): any of them fails, or a required claim is missing.
    """
    try:
        claims = jwt.decode(  # step 1 signature; 2 iss; 3 aud; 7 exp; 8 iat
            id_token,
            key,
            algorithms=[ALGORITHM],
            audience=client_id,
            issuer=issuer,
            leeway=leeway_s,
            options={"require": ["iss", "aud", "exp", "iat", "sub", "nonce"], "verify_iat": True},
        )
    except jwt.ExpiredSignatureError:
        raise LaunchError(403, "The launch has expired; launch the activity again from the course.") from None
    except jwt.InvalidAudienceError:
        raise LaunchError(
            403, "The launch was meant for another tool (its audience is not this judge's client id)."
        ) from None
    except jwt.InvalidIssuerError:
        raise LaunchError(403, "The launch came from another issuer than the login started with.") from None
    except jwt.InvalidSignatureError:
        raise LaunchError(403, "The launch's signature does not verify against the platform's public key.") from None
    except jwt.ImmatureSignatureError:
        raise LaunchError(403, "The launch was issued in the future (check the platform's clock).") from None
    except jwt.MissingRequiredClaimError as exc:
        raise LaunchError(403, f"The launch lacks the {exc.claim!r} claim.") from None
    except jwt.InvalidTokenError:
        raise LaunchError(403, "The launch's id_token is not valid.") from None
    return claims


def _check_claims(
    claims: dict[str, Any],
    *,
    client_id: str,
    deployment_ids: tuple[str, ...],
    expected_nonce: str,
    message_types: tuple[str, ...],
) -> None:
    """Raises `LaunchError(403)` when verified claims fail the remaining OIDC and LTI 1.3 checks."""
    aud = claims["aud"]
    azp = claims.get("azp")
    # steps 4-5: several audiences need an azp; an azp present must be this tool's client id
    if isinstance(aud, list) and len(aud) > 1 and azp is None:
        raise LaunchError(403, "The launch names several audiences and no authorized party (azp).")
    if azp is not None and azp != client_id:
        raise LaunchError(403, "The launch's authorized party (azp) is another tool.")
    if not isinstance(claims.get("nonce"), str) or claims["nonce"] != expected_nonce:  # step 9 (this login's)
        raise LaunchError(403, "The launch's nonce does not match its login; launch again from the course.")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise LaunchError(403, "The launch names no user (sub): anonymous launches are not supported.")
    if claims.get(CLAIM_VERSION) != LTI_VERSION:  # LTI 1.3 Core 5.3.2
        raise LaunchError(403, f"The launch is LTI version {claims.get(CLAIM_VERSION)!r}; this judge speaks 1.3.0.")
    message_type = claims.get(CLAIM_MESSAGE_TYPE)
    if message_type not in message_types:  # LTI 1.3 Core 5.3.1
        raise LaunchError(
            403, f"The launch is a {message_type!r} message; this judge accepts {' and '.join(message_types)} only."
        )
    if claims.get(CLAIM_DEPLOYMENT_ID) not in deployment_ids:  # LTI 1.3 Core 5.3.3
        raise LaunchError(403, "The launch came from a deployment of the tool that is not registered with this judge.")
    link = claims.get(CLAIM_RESOURCE_LINK)
    if message_type == RESOURCE_LINK_REQUEST and (  # Core 5.3.5
        not isinstance(link, dict) or not isinstance(link.get("id"), str) or not link["id"]
    ):
        raise LaunchError(403, "The launch names no resource link.")
    if not isinstance(claims.get(CLAIM_ROLES), list):  # Core 5.3.7 (may be empty)
        raise LaunchError(403, "The launch carries no roles claim.")


def verify_id_token(
    id_token: str,
    *,
    issuer: str,
    client_id: str,
    deployment_ids: tuple[str, ...],
    expected_nonce: str,
    key_for: Callable[[str], Any],
    leeway_s: float = LEEWAY_S,
    message_types: tuple[str, ...] = (RESOURCE_LINK_REQUEST,),
) -> dict[str, Any]:
    """Verifies a launch's id_token (Security Framework 5.1.3) and returns its claims.

    Args:
        issuer, client_id, deployment_ids: the registered platform the login initiation was for.
        expected_nonce: the nonce sent with this launch's login initiation.
        key_for: the platform's public key for a `kid` (raises LaunchError when unknown).
        leeway_s: clock skew allowed on exp and iat, seconds.
        message_types: the LTI message types accepted (a resource link launch by default; the
            launch route also accepts `LtiDeepLinkingRequest`, whose own claims
            `server.lti.deep_linking.settings_of` checks: it has no resource link claim).

    Raises:
        LaunchError(400): not a JWT; LaunchError(403): anything that fails a check.
    """
    kid = _signing_kid(id_token)
    key = key_for(kid)
    claims = _decoded_claims(id_token, key, issuer=issuer, client_id=client_id, leeway_s=leeway_s)
    _check_claims(
        claims,
        client_id=client_id,
        deployment_ids=deployment_ids,
        expected_nonce=expected_nonce,
        message_types=message_types,
    )
    return claims
