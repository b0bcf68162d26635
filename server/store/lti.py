"""The LTI tables (migration 0004 and later) and the values their store returns.

- `lti_platforms`: a registered platform (an LMS), keyed by (issuer, client_id): its OIDC
  authorization URL, token URL (and token audience, which D2L sets apart), JWKS URL;
- `lti_deployments`: the deployment ids registered for a platform (LTI 1.3 Core 3.1.3);
- `lti_logins`: a login initiation in progress: SHA-256 of its `state`, the `nonce` sent with it,
  its platform and expiry (Security Framework 5.1.1.1-5.1.1.2); consumed once by the launch;
- `lti_nonces`: the nonces of accepted id_tokens, remembered until the token expires, so an
  id_token is never accepted twice (Security Framework 5.1.3 step 9);
- `lti_users`: who a launch's (issuer, sub) is: the judge account it signs in, name, email, role;
- `lti_resource_links`: a resource link (a placement of a problem in a course), with the AGS
  endpoint claim of its latest launch (line item URL, line items URL, scopes) for grade passback;
- `lti_contexts`: an LMS context's (a course's) Names and Role Provisioning Services 2.0
  memberships URL, from the latest launch that carried the claim (migration 0014);
- `lti_launch_tokens`: one-time tokens (SHA-256 stored) that turn a launch into a session in a new
  window when the LMS's iframe does not keep our cookies;
- `lti_registration_urls`: one-time Dynamic Registration URLs (`server.lti.registration`).

- `lti_grade_passbacks`: what was and is to be passed back to the LMS for each student's resource
  link (migration 0005; `server.store.lti_passback` says how rows move).

`LtiStore` (`server.store.lti_store`) reads and writes them, `PassbackStore`
(`server.store.lti_passback`) the passbacks.

Every write is its own committed transaction. Times are UTC (`server.store.db.utcnow`).
"""

from __future__ import annotations

import enum
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from server.store.db import Base, UTCDateTime, enum_column, utcnow

LOGIN_TTL_S = 300  # a login initiation's state and nonce live 5 minutes
LAUNCH_TOKEN_TTL_S = 120  # a one-time launch token lives 2 minutes
MAX_EXPIRY_MINUTES = 7 * 24 * 60


def sha256_hex(value: str) -> str:
    """SHA-256 of `value` (UTF-8) in hex: how states and launch tokens are stored (they are 256
    random bits, so a fast hash is enough)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


class LtiPlatform(Base):
    """A registered LTI 1.3 platform (`remat-judge lti register`).

    Attributes:
        issuer: the platform's `iss` (e.g. https://canvas.instructure.com).
        client_id: the client id the platform gave this tool; the id_token's `aud`.
        auth_login_url: OIDC authorization endpoint the login initiation redirects to.
        auth_token_url: OAuth 2 token endpoint (for grade passback, later).
        token_audience: `aud` of the client assertion sent to the token endpoint; None: the token URL.
        keyset_url: the platform's public JWKS.
    """

    __tablename__ = "lti_platforms"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    auth_login_url: Mapped[str] = mapped_column(Text)
    auth_token_url: Mapped[str] = mapped_column(Text)
    keyset_url: Mapped[str] = mapped_column(Text)
    token_audience: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("issuer", "client_id", name="uq_lti_platforms_issuer_client"),)


class LtiDeployment(Base):
    """A deployment of the tool on a platform (LTI 1.3 Core 3.1.3): launches from any other are refused."""

    __tablename__ = "lti_deployments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_platforms.id", name="fk_lti_deployments_platform", ondelete="CASCADE")
    )
    deployment_id: Mapped[str] = mapped_column(String(255))

    __table_args__ = (UniqueConstraint("platform_id", "deployment_id", name="uq_lti_deployments_platform_deployment"),)


class LtiLogin(Base):
    """A login initiation waiting for its launch: the state (as SHA-256) and nonce we sent.

    Attributes:
        storage_target: the platform's `lti_storage_target` (LTI Client Side postMessage
            Storage) when the login named one: the state's browser binding then lives in the
            platform's storage frame; None: in a cookie only.
        binding_hash: SHA-256 of the random binding value put into platform storage.
        relaunch_json: the login's parameters (JSON), so a refused cookie-less launch can offer
            the same login again in a new, first-party window.
    """

    __tablename__ = "lti_logins"

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(64))
    platform_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_platforms.id", name="fk_lti_logins_platform", ondelete="CASCADE")
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    storage_target: Mapped[str | None] = mapped_column(String(255), nullable=True)
    binding_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    relaunch_json: Mapped[str | None] = mapped_column(Text, nullable=True)


class LtiNonce(Base):
    """A nonce of an accepted id_token, kept until `expires_at` (the token's own expiry plus leeway)."""

    __tablename__ = "lti_nonces"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issuer: Mapped[str] = mapped_column(String(255))
    nonce: Mapped[str] = mapped_column(String(255))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)

    __table_args__ = (UniqueConstraint("issuer", "nonce", name="uq_lti_nonces_issuer_nonce"),)


def lti_email(issuer: str, sub: str) -> str:
    """The sign-in email of a platform user's account: `lti-<24 hex>@lti.invalid`, unique per
    (issuer, sub) and never a deliverable address (RFC 2606)."""
    return f"lti-{sha256_hex(issuer + chr(0) + sub)[:24]}@lti.invalid"


class LtiUser(Base):
    """A platform's user (issuer, sub) and the judge account a launch signs in."""

    __tablename__ = "lti_users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issuer: Mapped[str] = mapped_column(String(255))
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", name="fk_lti_users_user"), index=True)
    name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    email: Mapped[str | None] = mapped_column(String(254), nullable=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_launch_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("issuer", "sub", name="uq_lti_users_issuer_sub"),)


class LtiResourceLink(Base):
    """A resource link (a problem placed in a course) and the AGS endpoint of its latest launch.

    Attributes:
        ags_lineitem: the line item URL of the AGS endpoint claim, or None.
        ags_lineitems: the line items container URL, or None.
        ags_scope: JSON list of the AGS scopes the platform granted, or None.
    """

    __tablename__ = "lti_resource_links"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_platforms.id", name="fk_lti_resource_links_platform", ondelete="CASCADE")
    )
    deployment_id: Mapped[str] = mapped_column(String(255))
    resource_link_id: Mapped[str] = mapped_column(String(255))
    context_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    title: Mapped[str | None] = mapped_column(String(255), nullable=True)
    problem: Mapped[str] = mapped_column(String(64))
    ags_lineitem: Mapped[str | None] = mapped_column(Text, nullable=True)
    ags_lineitems: Mapped[str | None] = mapped_column(Text, nullable=True)
    ags_scope: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        UniqueConstraint("platform_id", "deployment_id", "resource_link_id", name="uq_lti_resource_links_link"),
    )


class LtiContext(Base):
    """An LMS context (a course) with the roster service its launches offer (LTI NRPS 2.0, its service claim).

    Attributes:
        memberships_url: the `context_memberships_url` of the latest launch from the context that
            carried a namesroleservice claim with version 2.0 (`server.lti.launch.memberships_url_of`).
    """

    __tablename__ = "lti_contexts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_platforms.id", name="fk_lti_contexts_platform", ondelete="CASCADE")
    )
    deployment_id: Mapped[str] = mapped_column(String(255))
    context_id: Mapped[str] = mapped_column(String(255))
    memberships_url: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("platform_id", "deployment_id", "context_id", name="uq_lti_contexts_context"),)


class LtiLaunchToken(Base):
    """A one-time token that signs `user_id` in and opens `target` (a same-site path), once."""

    __tablename__ = "lti_launch_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", name="fk_lti_launch_tokens_user"))
    target: Mapped[str] = mapped_column(String(300))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


@dataclass(frozen=True)
class PlatformView:
    """A platform with its deployment ids (what `lti list` prints and launches check)."""

    id: int
    issuer: str
    client_id: str
    auth_login_url: str
    auth_token_url: str
    keyset_url: str
    token_audience: str | None
    deployment_ids: tuple[str, ...]
    created_at: datetime


@dataclass(frozen=True)
class PendingLogin:
    """A stored login initiation (`LtiLogin`) as the launch reads it.

    Attributes:
        platform_id, nonce: the platform it named and the nonce sent to it.
        storage_target: the platform's postMessage storage frame, or None.
        binding_hash: SHA-256 of the value put into that storage, or None.
        relaunch: the login's parameters for a new-window relaunch ({} when not kept).
    """

    platform_id: int
    nonce: str
    storage_target: str | None = None
    binding_hash: str | None = None
    relaunch: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, login: LtiLogin) -> PendingLogin:
        try:
            relaunch = json.loads(login.relaunch_json) if login.relaunch_json else {}
        except ValueError:
            relaunch = {}
        return cls(
            platform_id=login.platform_id,
            nonce=login.nonce,
            storage_target=login.storage_target,
            binding_hash=login.binding_hash,
            relaunch=relaunch if isinstance(relaunch, dict) else {},
        )

    def binding_matches(self, value: str) -> bool:
        """Whether `value` (read back from the platform's storage) is this login's binding."""
        return (
            self.binding_hash is not None
            and bool(value)
            and secrets.compare_digest(self.binding_hash, sha256_hex(value))
        )


class RegistrationUrl(Base):
    """A one-time registration URL: its token's SHA-256, when it expires, when it was used and for
    which platform."""

    __tablename__ = "lti_registration_urls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[str] = mapped_column(String(254))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    platform_id: Mapped[int | None] = mapped_column(Integer, nullable=True)


def registration_hash(token: str) -> str:
    """What `lti_registration_urls` stores of a registration token: its SHA-256 (hex), salted
    with the table's purpose."""
    return hashlib.sha256(("lti-registration:" + token).encode("utf-8")).hexdigest()


class PassbackStatus(enum.StrEnum):
    """Where a grade passback row is (`server.store.lti_passback`): idle, pending, delivered,
    failed, refused."""

    IDLE = "idle"
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    REFUSED = "refused"


class LtiGradePassback(Base):
    """What was and is to be passed back for one student on one resource link (`server.store.lti_passback`)."""

    __tablename__ = "lti_grade_passbacks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    resource_link_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_resource_links.id", name="fk_lti_grade_passbacks_link", ondelete="CASCADE")
    )
    lti_user_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_users.id", name="fk_lti_grade_passbacks_lti_user")
    )
    user_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("users.id", name="fk_lti_grade_passbacks_user"), index=True
    )
    best_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    pending_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    pending_verdict_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    pending_submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    pending_submission_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    pending_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_sent_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_sent_timestamp: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    reserved_timestamp: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    status: Mapped[PassbackStatus] = mapped_column(enum_column(PassbackStatus, "lti_passback_status"))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    next_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True, index=True)
    last_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(300), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("resource_link_id", "lti_user_id", name="uq_lti_grade_passbacks_link_user"),)


@dataclass(frozen=True)
class DueScore:
    """A claimed row with what sending needs (a snapshot taken at the claim)."""

    id: int
    seq: int
    user_id: int
    link: LtiResourceLink | None
    verdict_at: datetime | None
    last_sent_score: float | None
    last_sent_timestamp: datetime | None
    reserved_timestamp: datetime | None
    attempts: int
    last_code: int | None
    sub: str | None
    lineitem: str | None
    platform: LtiPlatform | None


@dataclass(frozen=True)
class PassbackView:
    """One row as instructors see it (`/lti/grades`)."""

    issuer: str
    context_id: str | None
    link_title: str | None
    problem: str
    sub: str
    name: str | None
    best_score: float | None
    last_sent_score: float | None
    last_sent_timestamp: datetime | None
    status: str
    attempts: int
    last_code: int | None
    last_error: str | None
    updated_at: datetime
