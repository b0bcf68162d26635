"""LTI Assignment and Grade Services 2.0 client: access tokens and score passback.

Used by `server.lti.grade_sender` (grade passback after verdicts). Pieces:

- `access_token`: OAuth 2.0 client credentials with a JWT client assertion (RFC 7523; IMS
  Security Framework 4.1): the assertion is signed RS256 by the tool key, iss = sub = client id,
  aud = the platform's `token_audience` when registered (D2L), else its token URL; iat, exp
  (+5 min), a unique jti. Tokens are cached per (platform, scopes) until shortly before their
  `expires_in`.
- `post_score`: one POST of a `Score` to `<lineitem>/scores` (inserted before the query string:
  AGS 2.0 section 3.4; Moodle's line items carry `?type_id=`) as
  `application/vnd.ims.lis.v1.score+json`, classified as a `Delivery`: 2xx delivered; 401 the
  token was refused (`token_refused`: fetch a new one once, `send_score` does); 400, 409 and other
  4xx not retried, reported with the platform's message; 408, 429, 5xx, connection errors and
  time-outs retried (backoff is the caller's, `server.delivery.callbacks.backoff_s`).
- `send_score`: token + post, refetching the token once after a 401.
- Ordering: `next_timestamp` (a score's timestamp is strictly newer, in whole seconds, than the
  last one sent for the same user and line item: Moodle answers 409 otherwise). Pure. Which score
  is sent (best or last attempt, after the late rule) is the course's rule:
  `server.courses.rules.standing`.

Host safety (http(s) only, the host looked up once and the request pinned to the checked address,
no redirects, special addresses only within `allow_networks`) is `server.lti.lms_http`'s
`PinnedClient`, which `AgsClient` extends.

The score's body, URL, timestamps and delivery classes are in `server.lti.scores`.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlencode

import httpx

from server.delivery.callbacks import describe_error, excerpt
from server.delivery.targets import CallbackRefused, lookup, parse_url, special_address
from server.lti.keys import ToolKey
from server.lti.lms_http import AgsRefused, PinnedClient, network_refusal
from server.lti.scores import SCORE_CONTENT_TYPE, Delivery, Score, score_body, scores_url

SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"


SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"


SCOPE_RESULT_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"


CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


ASSERTION_TTL_S = 300


class Platform(Protocol):
    """What is used of a registered platform (`PlatformView` or `LtiPlatform`)."""

    @property
    def issuer(self) -> str: ...
    @property
    def client_id(self) -> str: ...
    @property
    def auth_token_url(self) -> str: ...
    @property
    def token_audience(self) -> str | None: ...


class TokenError(Exception):
    """No access token. `retry`: worth trying later (time-out, connection error, 5xx)."""

    def __init__(self, message: str, *, retry: bool, status_code: int | None = None):
        super().__init__(message)
        self.retry, self.status_code = retry, status_code


def client_assertion(platform: Platform, key: ToolKey, *, now: float | None = None) -> str:
    """The RFC 7523 client assertion for `platform`'s token endpoint (Security Framework 4.1)."""
    issued = int(time.time() if now is None else now)
    return key.sign(
        {
            "iss": platform.client_id,
            "sub": platform.client_id,
            "aud": platform.token_audience or platform.auth_token_url,
            "iat": issued,
            "exp": issued + ASSERTION_TTL_S,
            "jti": secrets.token_urlsafe(24),
        }
    )


def error_message(raw: bytes) -> str:
    """The platform's message in an error answer: a JSON `message`/`error_description`/`error`/
    `reason`, else an excerpt of the body."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        data = None
    if isinstance(data, dict):
        for name in ("message", "error_description", "error", "reason", "detail"):
            if isinstance(data.get(name), str) and data[name]:
                return excerpt(data[name].encode("utf-8", "replace"))
    return excerpt(raw)


class AgsClient(PinnedClient):
    """Token cache and HTTP for AGS (its requests: `PinnedClient.request`). Thread-safe.

    Args:
        timeout_s, allow_networks, ssl_context: as `PinnedClient`'s.
        token_margin_s: a cached token is used until this long before it expires (at most half
            its lifetime).
    """

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        allow_networks: Iterable[str] = (),
        ssl_context: ssl.SSLContext | None = None,
        token_margin_s: float = 60.0,
    ):
        super().__init__(timeout_s=timeout_s, allow_networks=allow_networks, ssl_context=ssl_context)
        self.token_margin_s = token_margin_s
        self._tokens: dict[tuple, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self.token_fetches = 0  # how many tokens were fetched (for tests and metrics)

    def advice(self, url: str) -> str | None:
        """`network_advice` for `url` with this client's allowed networks."""
        return network_advice(url, [str(n) for n in self.allow_networks])

    # -- tokens --

    @staticmethod
    def _cache_key(platform: Platform, scopes: Iterable[str]) -> tuple:
        return (
            platform.issuer,
            platform.client_id,
            platform.auth_token_url,
            platform.token_audience,
            tuple(sorted(set(scopes))),
        )

    def access_token(self, platform: Platform, key: ToolKey, scopes: Iterable[str]) -> str:
        """A bearer token for `scopes` on `platform`, cached until shortly before it expires.

        Raises:
            TokenError: the platform gave none (`retry` says whether trying later may help).
        """
        scopes = tuple(sorted(set(scopes)))
        cache_key = self._cache_key(platform, scopes)
        with self._lock:
            cached = self._tokens.get(cache_key)
            if cached is not None and cached[1] > time.monotonic():
                return cached[0]
        form = {
            "grant_type": "client_credentials",
            "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": client_assertion(platform, key),
            "scope": " ".join(scopes),
        }
        content = urlencode(form).encode("ascii")
        try:
            answer = self.request(
                "POST",
                platform.auth_token_url,
                content=content,
                headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
            )
        except AgsRefused as exc:
            raise TokenError(f"token URL refused: {exc}", retry=False) from None
        except socket.gaierror as exc:
            raise TokenError(f"looking up the token host failed for now ({exc.strerror})", retry=True) from None
        except httpx.TimeoutException:
            raise TokenError(f"the token endpoint timed out after {self.timeout_s:g} s", retry=True) from None
        except httpx.HTTPError as exc:
            raise TokenError(f"the token request failed: {describe_error(exc)}", retry=True) from None
        self.token_fetches += 1
        code = answer.status_code
        if not 200 <= code < 300:
            retry = code >= 500 or code in (408, 429)
            raise TokenError(
                f"the token endpoint answered {code}: {error_message(answer.body)}", retry=retry, status_code=code
            )
        try:
            data = json.loads(answer.body)
            token = data["access_token"]
            if not isinstance(token, str) or not token:
                raise ValueError
            expires_in = float(data.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            raise TokenError(
                "the token endpoint's answer holds no access_token", retry=False, status_code=code
            ) from None
        lifetime = max(0.0, expires_in - min(self.token_margin_s, expires_in / 2))
        with self._lock:
            self._tokens[cache_key] = (token, time.monotonic() + lifetime)
        return token

    def forget_token(self, platform: Platform, scopes: Iterable[str], token: str) -> None:
        """Drops `token` from the cache (the platform refused it), unless a newer one replaced it."""
        cache_key = self._cache_key(platform, scopes)
        with self._lock:
            cached = self._tokens.get(cache_key)
            if cached is not None and cached[0] == token:
                del self._tokens[cache_key]

    # -- scores --

    def post_score(self, lineitem_url: str, token: str, score: Score) -> Delivery:
        """One POST of `score` to the line item's scores URL; never raises for what the URL or the
        platform does (see `Delivery`)."""
        body = json.dumps(score_body(score)).encode("utf-8")
        try:
            answer = self.request(
                "POST",
                scores_url(lineitem_url),
                content=body,
                headers={"Content-Type": SCORE_CONTENT_TYPE, "Authorization": f"Bearer {token}"},
            )
        except AgsRefused as exc:
            return Delivery(None, False, False, f"line item URL refused: {exc}")
        except socket.gaierror as exc:
            return Delivery(None, False, True, f"looking up the line item host failed for now ({exc.strerror})")
        except httpx.TimeoutException:
            return Delivery(None, False, True, f"timed out after {self.timeout_s:g} s")
        except httpx.HTTPError as exc:
            return Delivery(None, False, True, f"the request failed: {describe_error(exc)}")
        code = answer.status_code
        if 200 <= code < 300:
            return Delivery(code, True, False, None)
        said = error_message(answer.body)
        said = f": {said}" if said else ""
        if code == 401:
            return Delivery(code, False, False, f"the platform refused the token (401){said}", token_refused=True)
        if 300 <= code < 400:
            return Delivery(code, False, False, f"the platform answered {code}, a redirect (not followed)")
        if code == 409:
            return Delivery(code, False, False, f"the platform kept a newer score (409){said}")
        retry = code >= 500 or code in (408, 429)
        return Delivery(code, False, retry, f"the platform answered {code}{said}")

    def send_score(
        self,
        platform: Platform,
        key: ToolKey,
        lineitem_url: str,
        score: Score,
        *,
        scopes: Iterable[str] = (SCOPE_SCORE,),
    ) -> Delivery:
        """Token, then `post_score`; after a 401, forgets the token, fetches a new one and posts
        once more. A token failure is a `Delivery` without status (retry as the token error says)."""
        scopes = tuple(scopes)
        for _attempt in range(2):
            try:
                token = self.access_token(platform, key, scopes)
            except TokenError as exc:
                return Delivery(None, False, exc.retry, f"no access token: {exc}")
            delivery = self.post_score(lineitem_url, token, score)
            if not delivery.token_refused:
                return delivery
            self.forget_token(platform, scopes, token)
        return delivery


def network_advice(url: str, allow_networks: Iterable[str]) -> str | None:
    """Why the judge would refuse to call `url` (a platform's token URL, its registration
    endpoint) and what to set, or None when it may. Said at registration, on /lti/setup and by
    `remat-judge lti register`, so grades that could never arrive are seen at once.

    Examples: "10.0.0.5 is a private address: add 10.0.0.0/8 to REMAT_JUDGE_LTI_ALLOW_NETWORKS",
    "lms.campus resolves to 192.168.4.2, a private address: add 192.168.0.0/16 to ...",
    "lms.example does not resolve from the judge". Never raises (a name server that does not
    answer now is said, not raised).
    """
    try:
        parsed = parse_url(url)
    except CallbackRefused as exc:
        return str(exc)
    allowed = []
    for network in allow_networks:
        try:
            allowed.append(ipaddress.ip_network(network, strict=False))
        except ValueError:
            continue
    try:
        addresses = lookup(parsed.host, parsed.port)
    except CallbackRefused:
        return f"{parsed.host} does not resolve from the judge"
    except OSError:
        return f"{parsed.host} could not be looked up just now"
    for address in addresses:
        ip = ipaddress.ip_address(address.partition("%")[0])
        kind = special_address(ip)
        if kind is None or any(ip in network for network in allowed):
            continue
        return network_refusal(parsed.host, ip, kind) + " (until then the judge sends it no request)"
    return None


_default = AgsClient()


def access_token(platform: Platform, key: ToolKey, scopes: Iterable[str]) -> str:
    """`AgsClient.access_token` of a module-wide client (default settings)."""
    return _default.access_token(platform, key, scopes)


def post_score(lineitem_url: str, token: str, score: Score) -> Delivery:
    """`AgsClient.post_score` of a module-wide client (default settings)."""
    return _default.post_score(lineitem_url, token, score)
