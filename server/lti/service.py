"""The LTI tool's service: what its routes need, built once per process by the composition root
(`server.runtime`), held by the container (`Services.lti`) and reached through the `LtiDep`
dependency (`get_lti`, here: LTI stands on `server.deps`, which knows nothing of LTI).

Holds the LTI tables, the tool's key, the platforms' key cache, the launch limits and the judge's
public URL, and answers the questions every route asks of them (its base URL, whether cookies are
`SameSite=None; Secure`, whether plain HTTP is refused). No route logic lives here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request, status
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from server.deps import ServicesDep
from server.lti.ags import AgsClient
from server.lti.id_token import JwksCache
from server.lti.keys import ToolKey, load_or_create
from server.lti.launch import LaunchError
from server.settings import Settings
from server.store.course_store import CourseStore
from server.store.lti_passback import PassbackStore
from server.store.lti_store import LtiStore, RegistrationStore
from server.web.cookies import secure_request

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass
class LtiService:
    """What the LTI routes need, made once per process (`server.runtime.build_services`).

    Attributes:
        store: the LTI tables (read per request: registrations need no restart).
        key: the tool's key pair (`<data_dir>/lti_private_key.pem`).
        jwks: the platforms' public keys, cached by kid.
        public_url: the judge's public base URL (`REMAT_JUDGE_PUBLIC_URL`, e.g.
            https://judge.example.org) from which redirect_uri is made; None: the request's own
            base URL (fine without a reverse proxy that rewrites the host or scheme).
            `REMAT_JUDGE_LTI_JWKS_REFETCH_COOLDOWN_S` (default 10) sets `jwks.refetch_cooldown_s`.
        cookie_secure: `REMAT_JUDGE_COOKIE_SECURE`: every cookie `SameSite=None; Secure` (else
            decided by the URL: `server.web.cookies.secure_request`).
        passbacks: the grade passback rows (made by students' launches; `/lti/grades`).
        courses: courses of LMS contexts, enrollments and assignments (made by launches).
        limit: launches (login initiations) and deep linking picks per address and per platform
            (`REMAT_JUDGE_LTI_RATE_LIMIT`, `REMAT_JUDGE_LTI_PLATFORM_RATE_LIMIT`), or None.
        allow_http: `REMAT_JUDGE_LTI_ALLOW_HTTP`: launches over plain HTTP from a host that is not
            this machine (a local test); otherwise refused (`https_refusal`).
        client: the AGS client's safety for the judge's own calls to platforms (dynamic
            registration, the set-up page's connection test): `REMAT_JUDGE_LTI_ALLOW_NETWORKS`.
        registrations: the one-time dynamic registration URLs.
    """

    store: LtiStore
    key: ToolKey
    jwks: JwksCache
    public_url: str | None
    cookie_secure: bool
    passbacks: PassbackStore
    courses: CourseStore
    limit: LtiRateLimit | None = None
    allow_http: bool = False
    client: AgsClient = field(default_factory=AgsClient)
    registrations: RegistrationStore | None = None

    @classmethod
    def start(
        cls,
        settings: Settings,
        *,
        store: LtiStore,
        passbacks: PassbackStore,
        courses: CourseStore,
        registrations: RegistrationStore,
    ) -> LtiService:
        """The service of a deployment on its stores (built by `server.runtime.build_lti`):
        creates the tool's key on first start."""
        public = settings.public_url or None
        cooldown_s = settings.lti_jwks_refetch_cooldown_s
        return cls(
            store=store,
            key=load_or_create(settings.data_dir),
            jwks=JwksCache(refetch_cooldown_s=cooldown_s),
            public_url=public.rstrip("/") if public else None,
            cookie_secure=settings.cookie_secure,
            passbacks=passbacks,
            courses=courses,
            limit=LtiRateLimit.start(
                settings.lti_rate_limit, settings.lti_platform_rate_limit, settings.redis_url or "memory://"
            ),
            allow_http=settings.lti_allow_http,
            client=AgsClient(timeout_s=settings.callback_timeout_s, allow_networks=settings.lti_allow_networks),
            registrations=registrations,
        )

    def base_url(self, request: Request) -> str:
        return self.public_url or str(request.base_url).rstrip("/")

    def secure(self, request: Request) -> bool:
        """Whether this request's cookies are `SameSite=None; Secure` (`secure_request`)."""
        return secure_request(request.scope, public_url=self.public_url, forced=self.cookie_secure)

    def https_refusal(self, request: Request) -> LaunchError | None:
        """A refusal when the judge would speak LTI over plain HTTP to anyone but this machine:
        LMSs refuse tools without HTTPS, and inside their iframe only `Secure` cookies come back.
        None on HTTPS, for a loopback host (a local test), or with `REMAT_JUDGE_LTI_ALLOW_HTTP`."""
        base = urlsplit(self.base_url(request))
        if base.scheme == "https" or self.allow_http or (base.hostname or "") in LOOPBACK_HOSTS:
            return None
        return LaunchError(
            503,
            "This judge is set up for LTI over plain HTTP, which LMSs refuse. Its operator "
            "sets REMAT_JUDGE_PUBLIC_URL=https://<its address> (behind a TLS proxy whose headers "
            "it trusts), or REMAT_JUDGE_LTI_ALLOW_HTTP=true for a local test.",
        )


def get_lti(services: ServicesDep) -> LtiService:
    """The LTI tool's service of the app (the container holds it as an `object`: it names nothing
    of the floors above it).

    Raises:
        HTTPException(404): an app built without LTI (a test's services).
        TypeError: the container holds something else there (a mistake in building it).
    """
    lti = services.lti
    if lti is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "LTI is not set up on this server")
    if not isinstance(lti, LtiService):
        raise TypeError(f"Services.lti holds a {type(lti).__name__}, not an LtiService")
    return lti


LtiDep = Annotated[LtiService, Depends(get_lti)]


class LtiRateLimit:
    """Launches per address and per platform (`limits`' moving window; in Redis when scaled out,
    so every API process shares one count).

    A launch is counted once, at its login initiation: the only step that stores state before
    anything is verified (the launch itself needs that state, the landing a one-time token). The
    defaults fit a classroom: 600 a minute per address lets a lab of 300 behind one campus NAT
    launch at once; 6,000 a minute per platform bounds what one issuer's logins can make the judge
    store. Deep linking picks (signed by the judge) count per address too.
    """

    def __init__(self, per_address: list[Any], per_platform: list[Any], storage_uri: str):
        self.per_address, self.per_platform = per_address, per_platform
        self.limiter = MovingWindowRateLimiter(storage_from_string(storage_uri))

    @classmethod
    def start(cls, per_address: str, per_platform: str, storage_uri: str) -> LtiRateLimit | None:
        """None when both are empty. Raises ValueError when a text is not `limits` notation."""
        address = [parse(part) for part in per_address.split(";") if part.strip()]
        platform = [parse(part) for part in per_platform.split(";") if part.strip()]
        return cls(address, platform, storage_uri) if address or platform else None

    def retry_after_s(self, address: str, platform: str | None = None) -> int | None:
        """Counts one launch from `address` (for `platform`, when known): None when allowed, else
        whole seconds to wait."""
        keys = [(item, "address", address) for item in self.per_address]
        if platform is not None:
            keys += [(item, "platform", platform) for item in self.per_platform]
        for item, kind, key in keys:
            if not self.limiter.hit(item, "lti", kind, key):
                reset_at, _ = self.limiter.get_window_stats(item, "lti", kind, key)
                return max(1, math.ceil(reset_at - time.time()))
        return None
