"""A simulated LTI 1.3 platform (an LMS) for tests: a real HTTP server on a free loopback port.

It has its own RSA key and serves:

- `GET /jwks`: its public JWK Set (the tool verifies launches against it);
- `GET /auth`: the OIDC authorization endpoint (IMS Security Framework 5.1.1.2-5.1.1.3). It checks
  the tool's authentication request (scope, response_type, response_mode, prompt, client_id,
  a registered redirect_uri, the login_hint it issued) and answers with an auto-submitting
  `form_post` of an id_token (signed with its key, carrying the request's nonce and every LTI
  claim of a resource link launch) and the state, to the redirect_uri.

What the next launches carry is `platform.launch` (a `LaunchSpec`: user, roles, deployment,
custom problem, AGS endpoint, and the knobs that forge bad tokens: another key, expired, wrong
audience, unknown deployment, a fixed nonce). Every authentication request is recorded in
`platform.auth_requests`; every id_token issued in `platform.issued`.

Routes are dispatched through `Platform.routes` ({(method, path): handler}), so a token
endpoint and line items (grade passback) can be added later as more handlers.

- `GET /nrps/memberships`: LTI Names and Role Provisioning Services 2.0: `platform.roster` as a
  membership container, `roster_page_size` members a page with a `Link: <...>; rel="next"` header
  to the next; wants a bearer token that `token_check(token, NRPS_SCOPE)` accepts (the simulated
  gradebook's `Gradebook.grants`: its token endpoint issues them) and the container media type in
  Accept. `roster_script` holds (status, body) answers to give the next requests instead (a
  platform error); every request is recorded in `roster_requests`. `nrps_claim()` is the claim a
  launch carries for it (put it in a `LaunchSpec.extra`).

`Browser` drives the tool like a browser would: an httpx client with a cookie jar that starts
the login, follows the redirects to the platform, parses the auto-submitting form and POSTs it.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

if TYPE_CHECKING:
    from pathlib import Path

    from tests.lti_gradebook import Gradebook
    from tests.support import Server

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
DEEP_LINKING_SETTINGS = DL + "deep_linking_settings"
LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
STUDENT = [LIS + "membership#Learner"]
INSTRUCTOR = [LIS + "membership#Instructor"]
TEACHING_ASSISTANT = [LIS + "membership/Instructor#TeachingAssistant"]
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
NRPS_MEDIA_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, str]:
    return {**json.loads(RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "alg": "RS256", "use": "sig"}


@dataclass
class LaunchSpec:
    """What the platform's next id_tokens say, and how they are (mis)made.

    Attributes:
        sub, name, email, roles: the user.
        deployment_id: the deployment claim.
        problem: the custom claim `problem` (None: no custom claim; the target_link_uri may name it).
        target_link_uri: the target_link_uri claim (None: the one of the login initiation).
        ags: the AGS endpoint claim (None: none).
        message_type, version: the LTI claims.
        aud: the audience (None: the client id); azp (None: none).
        exp_in_s, iat_offset_s: expiry and issue time relative to now, seconds.
        key: "platform" (its published key), or "other" (a key it does not publish, same kid).
        nonce: a fixed nonce instead of the request's (None: the request's).
        deep_linking: the deep_linking_settings claim (None: none); an LtiDeepLinkingRequest
            carries no resource_link claim (see `Platform.with_deep_linking`).
        extra: more claims.
    """

    sub: str = "student-1"
    name: str | None = "Ada Student"
    email: str | None = "ada.student@lms.example"
    roles: list[str] = field(default_factory=lambda: list(STUDENT))
    deployment_id: str = "deployment-1"
    problem: str | None = "remat_sin_sin"
    target_link_uri: str | None = None
    resource_link_id: str = "link-1"
    context_id: str = "course-42"
    ags: dict[str, Any] | None = None
    message_type: str = "LtiResourceLinkRequest"
    version: str = "1.3.0"
    aud: Any = None
    azp: str | None = None
    exp_in_s: float = 300
    iat_offset_s: float = 0
    key: str = "platform"
    nonce: str | None = None
    deep_linking: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _FormParser(HTMLParser):
    """The first form of a page: its action and its inputs' names and values."""

    def __init__(self, form_id: str | None = None) -> None:
        super().__init__()
        self.form_id = form_id
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self._in_form = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form" and self.action is None and (self.form_id is None or a.get("id") == self.form_id):
            self.action, self._in_form = a.get("action") or "", True
        elif tag == "input" and self._in_form and a.get("name"):
            self.fields[a["name"] or ""] = a.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False


def parse_form(page: str, form_id: str | None = None) -> tuple[str, dict[str, str]]:
    """(action, fields) of the first form in `page` (the one with id `form_id` when given).
    Raises AssertionError when there is none."""
    parser = _FormParser(form_id)
    parser.feed(page)
    assert parser.action is not None, f"no form in: {page[:500]}"
    return parser.action, parser.fields


class Platform:
    """A simulated LTI 1.3 platform on 127.0.0.1 (see the module docstring).

    Attributes:
        url: its base URL; `issuer` is the same unless given.
        client_id: the client id it gave the tool.
        redirect_uris: the tool's registered redirect URIs (the tool's `/lti/launch`).
        launch: what the next id_tokens carry.
    """

    def __init__(self, *, client_id: str = "judge-client", issuer: str | None = None):
        self.key, self.kid = new_key(), "platform-key-1"
        self.other_key = new_key()
        self.client_id = client_id
        self.redirect_uris: list[str] = []
        self.launch = LaunchSpec()
        self.by_login_hint: dict[str, LaunchSpec] = {}  # specs of concurrent launches, by their login_hint
        self.auth_requests: list[dict[str, str]] = []
        self.issued: list[str] = []
        self.jwks_fetches = 0
        self.tool_jwks_url: str | None = None  # where deep linking responses are verified
        self.deep_link_responses: list[str] = []  # every JWT posted to the deep_link_return_url
        self.deep_link_claims: list[dict[str, Any]] = []  # those that verified against tool_jwks_url
        # LTI Dynamic Registration: the bearer token the registration endpoint wants, what tools
        # sent it, and the issuer its OpenID configuration claims (None: its own)
        self.registration_token = "reg-token-" + secrets.token_hex(4)
        self.registrations: list[dict[str, Any]] = []
        self.configured_issuer: str | None = None
        # LTI NRPS 2.0: the course's members, served a page at a time to holders of a token
        self.roster: list[dict[str, Any]] = []
        self.roster_page_size = 2
        self.roster_script: list[tuple[int, str]] = []
        self.roster_requests: list[dict[str, str]] = []
        self.token_check: Callable[[str, str], bool] | None = None
        self.routes: dict[tuple[str, str], Callable[[BaseHTTPRequestHandler, dict[str, str]], None]] = {
            ("GET", "/jwks"): self._jwks,
            ("GET", "/auth"): self._auth,
            ("GET", "/course"): self._course,
            ("GET", "/storage-frame"): self._storage_frame,
            ("GET", "/.well-known/openid-configuration"): self._openid_configuration,
            ("POST", "/register"): self._register,
            ("GET", "/add-tool"): self._add_tool,
            ("POST", "/deep-link-return"): self._deep_link_return,
            ("GET", "/nrps/memberships"): self._memberships,
        }
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _dispatch(self, method: str) -> None:
                parts = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
                self.raw_body = b""
                if method == "POST":
                    self.raw_body = self.rfile.read(int(self.headers.get("content-length", 0)))
                    body = self.raw_body.decode("utf-8", "replace")
                    if not self.headers.get("content-type", "").startswith("application/json"):
                        params.update({k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()})
                handler = owner.routes.get((method, parts.path))
                if handler is None:
                    owner.reply(self, 404, "not found")
                else:
                    handler(self, params)

            def do_GET(self) -> None:
                self._dispatch("GET")

            def do_POST(self) -> None:
                self._dispatch("POST")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.issuer = issuer or self.url
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what a tool registers ------------------------------------------------------------------

    def register_args(self, *deployment_ids: str) -> list[str]:
        """The `remat-judge lti register` arguments for this platform."""
        args = [
            "lti",
            "register",
            "--issuer",
            self.issuer,
            "--client-id",
            self.client_id,
            "--auth-login-url",
            f"{self.url}/auth",
            "--auth-token-url",
            f"{self.url}/token",
            "--keyset-url",
            f"{self.url}/jwks",
        ]
        for deployment_id in deployment_ids or ("deployment-1",):
            args += ["--deployment-id", deployment_id]
        return args

    # -- HTTP ---------------------------------------------------------------------------------

    @staticmethod
    def reply(handler: BaseHTTPRequestHandler, code: int, body: str, content_type: str = "text/plain") -> None:
        data = body.encode()
        handler.send_response(code)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _jwks(self, handler: BaseHTTPRequestHandler, _: dict[str, str]) -> None:
        self.jwks_fetches += 1
        self.reply(handler, 200, json.dumps({"keys": [public_jwk(self.key, self.kid)]}), "application/json")

    def _auth(self, handler: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
        """The OIDC authorization endpoint: checks the request, answers with a form_post."""
        self.auth_requests.append(params)
        expected = {
            "scope": "openid",
            "response_type": "id_token",
            "response_mode": "form_post",
            "prompt": "none",
            "client_id": self.client_id,
        }
        wrong = [k for k, v in expected.items() if params.get(k) != v]
        if params.get("redirect_uri") not in self.redirect_uris:
            wrong.append("redirect_uri")
        if not params.get("state") or not params.get("nonce") or not params.get("login_hint"):
            wrong.append("state/nonce/login_hint")
        if wrong:
            self.reply(handler, 400, f"invalid authentication request: {', '.join(wrong)}")
            return
        token = self.id_token(params["nonce"], self.by_login_hint.get(params["login_hint"]))
        self.reply(handler, 200, self.form_post(params["redirect_uri"], token, params["state"]), "text/html")

    def _course(self, handler: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
        """A course page that embeds the tool's login initiation (`?login=<URL>`) in an iframe, as
        an LMS shows an activity. With `?storage=<name>`, it also holds the platform's storage
        frame under that name (LTI Client Side postMessage Storage; Canvas names it
        post_message_forwarding), which the login URL names as its lti_storage_target."""
        storage = params.get("storage", "")
        frame = f'<iframe name="{html.escape(storage)}" src="/storage-frame" hidden></iframe>' if storage else ""
        self.reply(
            handler,
            200,
            f"<!doctype html><html><body><h1>JAX course</h1>{frame}"
            f'<iframe id="tool" src="{html.escape(params.get("login", ""))}" '
            f'width="1000" height="700"></iframe></body></html>',
            "text/html",
        )

    def _storage_frame(self, handler: BaseHTTPRequestHandler, _: dict[str, str]) -> None:
        """The platform's storage frame: answers lti.put_data / lti.get_data (and lti.capabilities)
        from any origin, keeping each origin's keys apart, and answering to the sender's origin."""
        self.reply(
            handler,
            200,
            """<!doctype html><html><body><script>
var stored = {};
window.addEventListener("message", function (event) {
  var m = event.data || {};
  var answer = {subject: m.subject + ".response", message_id: m.message_id};
  if (m.subject === "lti.capabilities") {
    answer.supported_messages = [{subject: "lti.put_data"}, {subject: "lti.get_data"}];
  } else if (m.subject === "lti.put_data") {
    stored[event.origin + " " + m.key] = m.value; answer.key = m.key; answer.value = m.value;
  } else if (m.subject === "lti.get_data") {
    var k = event.origin + " " + m.key;
    answer.key = m.key;
    if (k in stored) { answer.value = stored[k]; }
    else { answer.error = {code: "bad_request", message: "no such key"}; }
  } else { return; }
  event.source.postMessage(answer, event.origin);
});
</script></body></html>""",
            "text/html",
        )

    def _openid_configuration(self, handler: BaseHTTPRequestHandler, _: dict[str, str]) -> None:
        """The platform's OpenID configuration (LTI Dynamic Registration 3.4)."""
        self.reply(
            handler,
            200,
            json.dumps(
                {
                    "issuer": self.configured_issuer or self.issuer,
                    "authorization_endpoint": f"{self.url}/auth",
                    "token_endpoint": f"{self.url}/token",
                    "jwks_uri": f"{self.url}/jwks",
                    "registration_endpoint": f"{self.url}/register",
                    "token_endpoint_auth_methods_supported": ["private_key_jwt"],
                    "scopes_supported": ["openid", "https://purl.imsglobal.org/spec/lti-ags/scope/score"],
                    "response_types_supported": ["id_token"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "claims_supported": ["sub", "iss", "name", "email"],
                    "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                        "product_family_code": "simulated-lms",
                        "version": "1.0",
                        "messages_supported": [{"type": "LtiResourceLinkRequest"}, {"type": "LtiDeepLinkingRequest"}],
                    },
                }
            ),
            "application/json",
        )

    def _register(self, handler: BaseHTTPRequestHandler, _: dict[str, str]) -> None:
        """The registration endpoint: wants the registration token as bearer and a JSON client
        registration with the LTI tool configuration; answers a new client id and a deployment,
        and from then on launches as that client to the registered redirect URIs."""
        if handler.headers.get("authorization") != f"Bearer {self.registration_token}":
            self.reply(handler, 401, json.dumps({"error": "invalid registration token"}), "application/json")
            return
        try:
            sent = json.loads(getattr(handler, "raw_body", b"") or b"{}")
            tool = sent["https://purl.imsglobal.org/spec/lti-tool-configuration"]
            assert sent["redirect_uris"] and sent["initiate_login_uri"] and sent["jwks_uri"] and tool["messages"]
        except (ValueError, KeyError, TypeError, AssertionError) as exc:
            self.reply(handler, 400, json.dumps({"error": f"invalid client registration: {exc!r}"}), "application/json")
            return
        self.registrations.append(sent)
        self.client_id = f"dynamic-client-{len(self.registrations)}"
        self.redirect_uris = list(sent["redirect_uris"])
        answer = {
            **sent,
            "client_id": self.client_id,
            "https://purl.imsglobal.org/spec/lti-tool-configuration": {**tool, "deployment_id": "dynamic-deployment"},
        }
        self.reply(handler, 200, json.dumps(answer), "application/json")

    def _add_tool(self, handler: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
        """The LMS's "add a tool" dialog: opens the tool's registration URL (`?url=`) in an iframe
        with its OpenID configuration and registration token, and closes (writes "closed" into
        #status) when the tool posts org.imsglobal.lti.close."""
        target = (
            params.get("url", "")
            + "?"
            + urlencode(
                {
                    "openid_configuration": f"{self.url}/.well-known/openid-configuration",
                    "registration_token": self.registration_token,
                }
            )
        )
        self.reply(
            handler,
            200,
            f"""<!doctype html><html><body><p id="status">open</p>
<iframe id="registration" src="{html.escape(target)}" width="900" height="600"></iframe>
<script>window.addEventListener("message", function (e) {{
  if (e.data && e.data.subject === "org.imsglobal.lti.close") {{
    document.getElementById("status").textContent = "closed";
    document.getElementById("registration").remove();
  }}
}});</script></body></html>""",
            "text/html",
        )

    @property
    def memberships_url(self) -> str:
        return f"{self.url}/nrps/memberships"

    def nrps_claim(self) -> dict[str, Any]:
        """The namesroleservice claim of a launch from the course (`LaunchSpec.extra`)."""
        return {NRPS_CLAIM: {"context_memberships_url": self.memberships_url, "service_versions": ["2.0"]}}

    def _memberships(self, handler: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
        """The NRPS 2.0 memberships endpoint (see the module docstring)."""
        self.roster_requests.append(
            {"path": handler.path, **{k.lower(): v for k, v in handler.headers.items()}, **params}
        )
        auth = handler.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else ""
        if self.token_check is None or not token or not self.token_check(token, NRPS_SCOPE):
            self.reply(handler, 401, json.dumps({"error": "invalid_token"}), "application/json")
            return
        if NRPS_MEDIA_TYPE not in handler.headers.get("accept", ""):
            self.reply(handler, 406, json.dumps({"error": "not acceptable"}), "application/json")
            return
        if self.roster_script:
            code, body = self.roster_script.pop(0)
            self.reply(handler, code, body, "application/json")
            return
        page = int(params.get("page", "1"))
        size = self.roster_page_size
        members = self.roster[(page - 1) * size : page * size]
        body = json.dumps(
            {
                "id": f"{self.memberships_url}?page={page}",
                "context": {"id": self.launch.context_id, "title": "JAX course"},
                "members": members,
            }
        ).encode()
        handler.send_response(200)
        handler.send_header("content-type", NRPS_MEDIA_TYPE)
        handler.send_header("content-length", str(len(body)))
        if page * size < len(self.roster):  # a relative link, as RFC 8288 allows
            handler.send_header("link", f'</nrps/memberships?page={page + 1}>; rel="next"')
        handler.end_headers()
        handler.wfile.write(body)

    @property
    def deep_link_return_url(self) -> str:
        return f"{self.url}/deep-link-return"

    def _deep_link_return(self, handler: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
        """The deep_link_return_url: records the tool's `JWT` and verifies it (signature against
        `tool_jwks_url` with PyJWT, RS256, aud = this issuer, iss = the client id, exp/iat)."""
        token = params.get("JWT", "")
        self.deep_link_responses.append(token)
        try:
            assert self.tool_jwks_url, "tool_jwks_url is not set"
            key = jwt.PyJWKClient(self.tool_jwks_url, cache_keys=False).get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                audience=self.issuer,
                issuer=self.client_id,
                options={"require": ["iss", "aud", "exp", "iat", "nonce"]},
            )
        except Exception as exc:  # noqa: BLE001 - the test reads the reason
            self.reply(handler, 400, f"invalid deep linking response: {exc!r}")
            return
        self.deep_link_claims.append(claims)
        self.reply(handler, 200, "<!doctype html><p>Content added to the course.</p>", "text/html")

    @staticmethod
    def form_post(action: str, id_token: str, state: str) -> str:
        """The auto-submitting page of a form_post response."""
        return (
            f'<!doctype html><html><body onload="document.forms[0].submit()">'
            f'<form method="post" action="{html.escape(action)}">'
            f'<input type="hidden" name="id_token" value="{html.escape(id_token)}">'
            f'<input type="hidden" name="state" value="{html.escape(state)}">'
            f'<noscript><button type="submit">Continue</button></noscript></form></body></html>'
        )

    # -- tokens -------------------------------------------------------------------------------

    def claims(self, nonce: str, spec: LaunchSpec | None = None, *, target_link_uri: str | None = None) -> dict:
        """The claims of a resource link launch as `spec` (default: `self.launch`) says."""
        s = spec or self.launch
        now = time.time()
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.client_id if s.aud is None else s.aud,
            "sub": s.sub,
            "iat": int(now + s.iat_offset_s),
            "exp": int(now + s.exp_in_s),
            "nonce": s.nonce or nonce,
            LTI + "message_type": s.message_type,
            LTI + "version": s.version,
            LTI + "deployment_id": s.deployment_id,
            LTI + "target_link_uri": s.target_link_uri or target_link_uri or "http://tool.invalid/lti/launch",
            LTI + "roles": list(s.roles),
            LTI + "context": {"id": s.context_id, "title": "JAX course"},
        }
        if s.message_type != "LtiDeepLinkingRequest":
            claims[LTI + "resource_link"] = {"id": s.resource_link_id, "title": "Checkpoint exercise"}
        if s.deep_linking is not None:
            claims[DEEP_LINKING_SETTINGS] = s.deep_linking
        if s.azp is not None:
            claims["azp"] = s.azp
        if s.name:
            claims["name"] = s.name
        if s.email:
            claims["email"] = s.email
        if s.problem is not None:
            claims[LTI + "custom"] = {"problem": s.problem}
        if s.ags is not None:
            claims[AGS] = s.ags
        claims.update(s.extra)
        return claims

    def sign(self, claims: dict, *, key: str = "platform", alg: str = "RS256", kid: str | None = None) -> str:
        """`claims` signed with the platform's key ("platform") or one it does not publish ("other")."""
        private = self.key if key == "platform" else self.other_key
        return jwt.encode(claims, private, algorithm=alg, headers={"kid": kid or self.kid})

    def id_token(self, nonce: str, spec: LaunchSpec | None = None, *, target_link_uri: str | None = None) -> str:
        s = spec or self.launch
        token = self.sign(self.claims(nonce, s, target_link_uri=target_link_uri), key=s.key)
        self.issued.append(token)
        return token

    def with_launch(self, **changes: Any) -> LaunchSpec:
        """Sets the next launches' spec to the default with `changes`; returns it."""
        self.launch = replace(LaunchSpec(), **changes)
        return self.launch

    def with_deep_linking(self, *, data: str | None = "opaque-platform-data", **changes: Any) -> LaunchSpec:
        """Sets the next launches to an instructor's `LtiDeepLinkingRequest` returning to this
        platform's deep_link_return_url (`changes` override the spec, e.g. roles or deep_linking)."""
        settings: dict[str, Any] = {
            "deep_link_return_url": self.deep_link_return_url,
            "accept_types": ["ltiResourceLink", "link"],
            "accept_presentation_document_targets": ["iframe", "window"],
            "accept_multiple": False,
            "auto_create": True,
        }
        if data is not None:
            settings["data"] = data
        spec = {
            "sub": "teacher-1",
            "name": "Grace Teacher",
            "email": "grace.teacher@lms.example",
            "roles": list(INSTRUCTOR),
            "problem": None,
            "message_type": "LtiDeepLinkingRequest",
            "deep_linking": settings,
            **changes,
        }
        return self.with_launch(**spec)


@dataclass
class Outcome:
    """Where a browser's launch ended: the last response, and the launch form it posted."""

    response: httpx.Response
    form: dict[str, str] = field(default_factory=dict)
    action: str = ""


class Browser:
    """A browser in tests: an httpx client with a cookie jar (cookies of 127.0.0.1 are shared by
    the tool and the platform, as a browser shares them across ports of one site)."""

    def __init__(self, tool_url: str):
        self.tool_url = tool_url
        self.client = httpx.Client(timeout=60, follow_redirects=True)

    def close(self) -> None:
        self.client.close()

    def login(
        self,
        platform: Platform,
        *,
        method: str = "GET",
        target_link_uri: str | None = None,
        login_hint: str = "hint-1",
        deployment_id: str | None = "deployment-1",
        message_hint: str = "msg-1",
        client_id: str | None = None,
    ) -> httpx.Response:
        """Starts the OIDC login at the tool as the platform would (a GET link or a POST form) and
        follows redirects up to the platform's auto-submitting page (or the tool's refusal)."""
        params = {
            "iss": platform.issuer,
            "login_hint": login_hint,
            "lti_message_hint": message_hint,
            "target_link_uri": target_link_uri or f"{self.tool_url}/lti/launch",
            "client_id": platform.client_id if client_id is None else client_id,
        }
        if deployment_id is not None:
            params["lti_deployment_id"] = deployment_id
        if method == "GET":
            return self.client.get(f"{self.tool_url}/lti/login?{urlencode(params)}")
        return self.client.post(f"{self.tool_url}/lti/login", data=params)

    def submit_form(self, page: httpx.Response) -> Outcome:
        """POSTs the first form of `page` to its action (what onload="submit()" does)."""
        action, fields = parse_form(page.text)
        return Outcome(self.client.post(action, data=fields, headers={"accept": "text/html"}), fields, action)

    def launch(self, platform: Platform, **login: Any) -> Outcome:
        """A whole launch: login initiation, the platform's form_post, the tool's answer (redirects
        followed)."""
        page = self.login(platform, **login)
        assert page.status_code == 200 and page.url.host == "127.0.0.1" and str(page.url).startswith(platform.url), (
            page.status_code,
            str(page.url),
            page.text[:500],
        )
        return self.submit_form(page)

    def signed_in(self) -> bool:
        """Whether the tool has a session for this browser (`/me` answers 200, not a redirect to sign in)."""
        return self.client.get(f"{self.tool_url}/me", follow_redirects=False).status_code == 200


def random_hint() -> str:
    return secrets.token_hex(4)


def start_tool(data_dir: Path, platform: Platform, *, workers: int = 1, env: dict[str, str] | None = None) -> Server:
    """A real judge server (`tests.support.Server`, no rate limits) that `platform` launches: the
    platform is told the tool's exact launch URL. Stop it with `.stop()`."""
    from tests.support import Server

    # every launch of the tests comes from 127.0.0.1: no rate limits (tests/unit/test_lti_limits.py tests them)
    server = Server(
        data_dir, workers=workers, env={"REMAT_JUDGE_RATE_LIMIT": "", "REMAT_JUDGE_LTI_RATE_LIMIT": "", **(env or {})}
    ).start()
    platform.redirect_uris = [f"{server.url}/lti/launch"]
    return server


def start_gradebook(server: Server, platform: Platform, deployment_id: str = "deployment-1") -> Gradebook:
    """A simulated gradebook (tests/lti_gradebook.py) that trusts the tool's public keys as served at
    its /lti/jwks, and `platform` registered with the judge (`remat-judge lti register`) with the
    gradebook's token endpoint. Stop it with `.stop()`."""
    import os

    import httpx

    from tests.lti_gradebook import Gradebook
    from tests.support import remat_judge

    jwks = httpx.get(f"{server.url}/lti/jwks", timeout=10).json()
    gradebook = Gradebook(jwks=jwks, client_id=platform.client_id).start()
    args = platform.register_args(deployment_id)
    args[args.index("--auth-token-url") + 1] = gradebook.token_url
    done = remat_judge(*args, "--data-dir", str(server.data_dir), env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    return gradebook
