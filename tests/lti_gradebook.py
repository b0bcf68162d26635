"""A simulated LMS gradebook for AGS tests: a real HTTP server (http.server) on a free loopback port.

- `POST /token`: OAuth 2.0 client credentials with a JWT client assertion (RFC 7523). Verifies
  the assertion RS256 against the tool's public JWKS (given as a dict, e.g. `ToolKey.jwks()`),
  aud (== `audience`), iss == sub == `client_id`, exp/iat required, exp not passed, and a jti never
  seen before (a replay is refused). Issues random bearer tokens with `expires_in` and the scopes
  asked for (only known AGS scopes, and NRPS's contextmembership.readonly).
- `POST /lineitems/<id>/lineitem/scores[?type_id=..]`: needs a live bearer token with the score
  scope (else 401), content type `application/vnd.ims.lis.v1.score+json`; enforces Moodle's rules:
  400 without userId, activityProgress, gradingProgress, timestamp (or scoreGiven without
  scoreMaximum), 409 when the timestamp is not newer, in whole seconds, than the stored one for
  (line item, user). Records every request (`requests`) and every accepted score (`scores`).
- `script`: statuses to answer the next score POSTs with before the rules (e.g. [503]).
- `revoke_all()`: every issued token now gets 401 (an expired token).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt

SCORE_CONTENT_TYPE = "application/vnd.ims.lis.v1.score+json"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
KNOWN_SCOPES = {
    "https://purl.imsglobal.org/spec/lti-ags/scope/score",
    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
    "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
    "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly",  # the platform's roster
}


@dataclass
class ScoreRequest:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class Gradebook:
    jwks: dict
    client_id: str
    audience: str | None = None  # None: the token URL
    expires_in: int = 3600
    requests: list[ScoreRequest] = field(default_factory=list)
    scores: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # (line item, user) -> accepted
    token_requests: list[dict] = field(default_factory=list)
    token_refusals: list[str] = field(default_factory=list)
    script: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._tokens: dict[str, tuple[float, set[str]]] = {}
        self._jtis: set[str] = set()
        self._stored: dict[tuple[str, str], int] = {}  # whole-second timestamp of the stored grade
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle --

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    def lineitem_url(self, item: str, query: str = "") -> str:
        return f"{self.base_url}/lineitems/{item}/lineitem{query}"

    def start(self) -> Gradebook:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def revoke_all(self) -> None:
        with self._lock:
            self._tokens.clear()

    def grants(self, token: str, scope: str) -> bool:
        """Whether `token` is live and was issued with `scope` (the simulated platform's NRPS
        endpoint asks: `Platform.token_check`)."""
        with self._lock:
            live = self._tokens.get(token)
        return live is not None and live[0] >= time.time() and scope in live[1]

    def accepted(self, item: str, user: str) -> list[dict]:
        return self.scores.get((item, user), [])

    # -- the endpoints --

    def _token(self, form: dict[str, list[str]]) -> tuple[int, dict]:
        one = {k: v[0] for k, v in form.items()}
        self.token_requests.append(one)
        if one.get("grant_type") != "client_credentials" or one.get("client_assertion_type") != ASSERTION_TYPE:
            return 400, {"error": "unsupported_grant_type"}
        try:
            header = jwt.get_unverified_header(one.get("client_assertion", ""))
            keys = {k["kid"]: jwt.PyJWK(k) for k in self.jwks["keys"]}
            if header.get("alg") != "RS256" or header.get("kid") not in keys:
                raise jwt.InvalidTokenError("unknown kid or alg")
            claims = jwt.decode(
                one["client_assertion"],
                keys[header["kid"]].key,
                algorithms=["RS256"],
                audience=self.audience or self.token_url,
                issuer=self.client_id,
                options={"require": ["iss", "sub", "aud", "exp", "iat", "jti"]},
            )
            if claims["sub"] != self.client_id:
                raise jwt.InvalidTokenError("sub is not the client id")
        except (jwt.InvalidTokenError, KeyError, ValueError) as exc:
            self.token_refusals.append(str(exc))
            return 401, {"error": "invalid_client", "error_description": str(exc)}
        with self._lock:
            if claims["jti"] in self._jtis:
                self.token_refusals.append("jti replayed")
                return 400, {"error": "invalid_grant", "error_description": "jti already used"}
            self._jtis.add(claims["jti"])
            scopes = set(one.get("scope", "").split())
            if not scopes or not scopes <= KNOWN_SCOPES:
                return 400, {"error": "invalid_scope"}
            token = secrets.token_urlsafe(24)
            self._tokens[token] = (time.time() + self.expires_in, scopes)
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": " ".join(sorted(scopes)),
        }

    def _score(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
        auth = headers.get("authorization", "")
        with self._lock:
            live = self._tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if (
            live is None
            or live[0] < time.time()
            or "https://purl.imsglobal.org/spec/lti-ags/scope/score" not in live[1]
        ):
            return 401, {"message": "invalid or expired token"}
        if self.script:
            status = self.script.pop(0)
            return status, {"message": f"scripted {status}"}
        if headers.get("content-type", "").split(";")[0].strip() != SCORE_CONTENT_TYPE:
            return 415, {"message": "wrong content type"}
        try:
            score = json.loads(body)
        except ValueError:
            return 400, {"message": "not JSON"}
        missing = [f for f in ("userId", "activityProgress", "gradingProgress", "timestamp") if f not in score]
        if "scoreGiven" in score and "scoreMaximum" not in score:
            missing.append("scoreMaximum")
        if missing:
            return 400, {"message": f"Incorrect score received: missing {', '.join(missing)}"}
        try:
            stamp = datetime.fromisoformat(score["timestamp"].replace("Z", "+00:00"))
            if stamp.tzinfo is None:
                raise ValueError
        except (ValueError, AttributeError):
            return 400, {"message": "bad timestamp"}
        item = path.split("/")[2]
        key = (item, str(score["userId"]))
        whole = int(stamp.timestamp())  # Moodle stores and compares whole seconds
        with self._lock:
            if key in self._stored and whole <= self._stored[key]:
                return 409, {"message": "Refusing score with an earlier timestamp for item and user"}
            self._stored[key] = whole
            self.scores.setdefault(key, []).append(score)
        return 200, {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        book = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                parts = urlsplit(self.path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                if parts.path == "/token":
                    self._answer(*book._token(parse_qs(body.decode("ascii", "replace"))))
                    return
                segments = parts.path.split("/")
                if len(segments) == 5 and segments[1] == "lineitems" and segments[3:] == ["lineitem", "scores"]:
                    status, payload = book._score(parts.path, headers, body)
                    book.requests.append(ScoreRequest(parts.path, parse_qs(parts.query), headers, body, status))
                    self._answer(status, payload)
                    return
                book.requests.append(ScoreRequest(parts.path, parse_qs(parts.query), headers, body, 404))
                self._answer(404, {"message": "no such endpoint"})

        return Handler
