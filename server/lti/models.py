"""LTI tables and `LtiStore`, the one place that reads and writes them (migration 0004).

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
  window when the LMS's iframe does not keep our cookies.

Every write is its own committed transaction. Times are UTC (`server.store.db.utcnow`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint, delete, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.courses.models import CourseRole
from server.store.accounts import NO_PASSWORD, UserRecord, UserStore
from server.store.db import Base, UTCDateTime, rowcount, utcnow

LOGIN_TTL_S = 300  # a login initiation's state and nonce live 5 minutes
LAUNCH_TOKEN_TTL_S = 120  # a one-time launch token lives 2 minutes


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


class LtiStore:
    """Reads and writes the LTI tables. Thread-safe: one session per call. Reads the database on
    every call (no cache), so every server process sees a registration at once."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.users = UserStore(engine)

    # -- platforms ------------------------------------------------------------------------------

    def register(
        self,
        *,
        issuer: str,
        client_id: str,
        deployment_ids: list[str],
        auth_login_url: str,
        auth_token_url: str,
        keyset_url: str,
        token_audience: str | None = None,
    ) -> PlatformView:
        """Registers a platform, or updates the one with this (issuer, client_id): its URLs are
        replaced and `deployment_ids` are added to its deployments."""
        with self._sessions.begin() as session:
            platform = session.execute(
                select(LtiPlatform).where(LtiPlatform.issuer == issuer, LtiPlatform.client_id == client_id)
            ).scalar_one_or_none()
            if platform is None:
                platform = LtiPlatform(issuer=issuer, client_id=client_id, created_at=utcnow())
                session.add(platform)
            platform.auth_login_url, platform.auth_token_url = auth_login_url, auth_token_url
            platform.keyset_url, platform.token_audience = keyset_url, token_audience
            session.flush()
            known = set(
                session.execute(
                    select(LtiDeployment.deployment_id).where(LtiDeployment.platform_id == platform.id)
                ).scalars()
            )
            for deployment_id in dict.fromkeys(deployment_ids):
                if deployment_id not in known:
                    session.add(LtiDeployment(platform_id=platform.id, deployment_id=deployment_id))
            platform_id = platform.id
        found = self.platform_by_id(platform_id)
        assert found is not None
        return found

    def _view(self, session, platform: LtiPlatform) -> PlatformView:
        deployments = session.execute(
            select(LtiDeployment.deployment_id)
            .where(LtiDeployment.platform_id == platform.id)
            .order_by(LtiDeployment.id)
        ).scalars()
        return PlatformView(
            id=platform.id,
            issuer=platform.issuer,
            client_id=platform.client_id,
            auth_login_url=platform.auth_login_url,
            auth_token_url=platform.auth_token_url,
            keyset_url=platform.keyset_url,
            token_audience=platform.token_audience,
            deployment_ids=tuple(deployments),
            created_at=platform.created_at,
        )

    def platform_by_id(self, platform_id: int) -> PlatformView | None:
        with self._sessions() as session:
            platform = session.get(LtiPlatform, platform_id)
            return None if platform is None else self._view(session, platform)

    def platforms_for(self, issuer: str, client_id: str | None = None) -> list[PlatformView]:
        """The platforms registered for `issuer` (only the one with `client_id` when given)."""
        query = select(LtiPlatform).where(LtiPlatform.issuer == issuer)
        if client_id is not None:
            query = query.where(LtiPlatform.client_id == client_id)
        with self._sessions() as session:
            return [self._view(session, p) for p in session.execute(query.order_by(LtiPlatform.id)).scalars()]

    def platforms(self) -> list[PlatformView]:
        with self._sessions() as session:
            return [
                self._view(session, p) for p in session.execute(select(LtiPlatform).order_by(LtiPlatform.id)).scalars()
            ]

    def remove(self, issuer: str, client_id: str) -> bool:
        """Removes a platform, its deployments, pending logins and resource links; False when
        there is none. Accounts made by its launches stay (their submissions are theirs)."""
        with self._sessions.begin() as session:
            platform = session.execute(
                select(LtiPlatform).where(LtiPlatform.issuer == issuer, LtiPlatform.client_id == client_id)
            ).scalar_one_or_none()
            if platform is None:
                return False
            for table in (LtiDeployment, LtiLogin, LtiResourceLink, LtiContext):
                session.execute(delete(table).where(table.platform_id == platform.id))
            session.delete(platform)
            return True

    # -- login initiation and launch ---------------------------------------------------------------

    def start_login(
        self,
        platform_id: int,
        *,
        ttl_s: float = LOGIN_TTL_S,
        storage_target: str | None = None,
        relaunch: dict[str, str] | None = None,
    ) -> tuple[str, str, str | None]:
        """Makes a state and a nonce (256 random bits each) for a login initiation, stores them
        (the state as SHA-256) for `ttl_s` seconds, and returns (state, nonce, binding). Drops
        expired ones.

        With a `storage_target` (the platform's postMessage storage frame), a third random value,
        the binding, is made too: the login page puts it into the platform's storage and only
        its SHA-256 is kept here (`PendingLogin.binding_matches`); otherwise binding is None.
        `relaunch` (the login's own parameters) is kept for a new-window relaunch.
        """
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        binding = secrets.token_urlsafe(32) if storage_target else None
        now = utcnow()
        with self._sessions.begin() as session:
            session.execute(delete(LtiLogin).where(LtiLogin.expires_at < now))
            session.add(
                LtiLogin(
                    state_hash=sha256_hex(state),
                    nonce=nonce,
                    platform_id=platform_id,
                    created_at=now,
                    expires_at=now + timedelta(seconds=ttl_s),
                    storage_target=storage_target,
                    binding_hash=sha256_hex(binding) if binding else None,
                    relaunch_json=json.dumps(relaunch) if relaunch else None,
                )
            )
        return state, nonce, binding

    def peek_login(self, state: str) -> PendingLogin | None:
        """The live login initiation of `state`, without using it (None: unknown or expired)."""
        with self._sessions() as session:
            login = session.get(LtiLogin, sha256_hex(state))
            if login is None or login.expires_at <= utcnow():
                return None
            return PendingLogin.of(login)

    def consume_login(self, state: str) -> PendingLogin | None:
        """Takes the login initiation of `state` once, or None when it is unknown, expired or
        already used (one conditional DELETE decides between concurrent uses)."""
        state_hash = sha256_hex(state)
        with self._sessions.begin() as session:
            login = session.get(LtiLogin, state_hash)
            if login is None:
                return None
            pending, expires_at = PendingLogin.of(login), login.expires_at
            taken = session.execute(
                delete(LtiLogin).where(LtiLogin.state_hash == state_hash).execution_options(synchronize_session=False)
            )
            if rowcount(taken) != 1 or expires_at <= utcnow():
                return None
            return pending

    def use_nonce(self, issuer: str, nonce: str, *, until: datetime) -> bool:
        """Remembers an id_token's nonce until `until`; False when it was used already (a replay)."""
        now = utcnow()
        try:
            with self._sessions.begin() as session:
                session.execute(delete(LtiNonce).where(LtiNonce.expires_at < now))
                session.add(LtiNonce(issuer=issuer, nonce=nonce, expires_at=until))
        except IntegrityError:
            return False
        return True

    def account_for(
        self, *, issuer: str, sub: str, name: str | None, email: str | None, role: CourseRole
    ) -> UserRecord:
        """The judge account of the platform user (issuer, sub), made on their first launch.

        The account is keyed by (issuer, sub) alone: its sign-in email is always the synthetic
        `lti-<24 hex of SHA-256(issuer NUL sub)>@lti.invalid` (RFC 2606 reserves .invalid), so a
        launch never takes an email a person could sign up with, and no existing account is
        merged with a platform identity (the platform could be anyone's). The platform's email is
        kept as the account's `contact_email` (shown to course staff). Name and contact email are
        refreshed on every launch; `role` (the course role of this launch) is recorded on the
        link only: no launch changes the account's site role (`server.authz`).
        """
        now = utcnow()
        with self._sessions.begin() as session:
            link = session.execute(
                select(LtiUser).where(LtiUser.issuer == issuer, LtiUser.sub == sub)
            ).scalar_one_or_none()
            if link is not None:
                link.name, link.email, link.role, link.last_launch_at = name, email, role.value, now
                user = session.get(UserRecord, link.user_id)
                assert user is not None
                if name:
                    user.display_name = name[:80]
                if email:
                    user.contact_email = email
                return user
        # no password: the account signs in through launches only (`server.web.auth.check_password`
        # answers "wrong password" for it); hashing a random one cost 0.1 s of CPU per first launch,
        # 30 s for a lab of 300
        unusable = NO_PASSWORD
        synthetic = lti_email(issuer, sub)
        display = (name or (email or "").split("@")[0] or "LTI user")[:80]
        user = self.users.by_email(synthetic) or self.users.create(
            email=synthetic, display_name=display, password_hash=unusable, contact_email=email
        )
        try:
            with self._sessions.begin() as session:
                session.add(
                    LtiUser(
                        issuer=issuer,
                        sub=sub,
                        user_id=user.id,
                        name=name,
                        email=email,
                        role=role.value,
                        created_at=now,
                        last_launch_at=now,
                    )
                )
        except IntegrityError:  # a concurrent first launch of the same user won: use its account
            return self.account_for(issuer=issuer, sub=sub, name=name, email=email, role=role)
        return user

    def lti_user(self, issuer: str, sub: str) -> LtiUser | None:
        with self._sessions() as session:
            return session.execute(
                select(LtiUser).where(LtiUser.issuer == issuer, LtiUser.sub == sub)
            ).scalar_one_or_none()

    def accounts_of(self, issuer: str, subs: list[str]) -> dict[str, int]:
        """{sub: judge account id} of the platform users among `subs` who have launched."""
        found: dict[str, int] = {}
        unique = sorted(set(subs))
        with self._sessions() as session:
            for start in range(0, len(unique), 500):
                rows = session.execute(
                    select(LtiUser.sub, LtiUser.user_id).where(
                        LtiUser.issuer == issuer, LtiUser.sub.in_(unique[start : start + 500])
                    )
                ).all()
                found.update((sub, user_id) for sub, user_id in rows)
        return found

    def save_resource_link(
        self,
        *,
        platform_id: int,
        deployment_id: str,
        resource_link_id: str,
        context_id: str | None,
        title: str | None,
        problem: str,
        ags: dict | None,
    ) -> LtiResourceLink:
        """Stores or updates a resource link with the AGS endpoint claim of this launch (kept as it
        was when a launch carries none)."""
        now = utcnow()
        values = dict(context_id=context_id, title=(title or None) and title[:255], problem=problem, updated_at=now)
        if ags:
            values.update(
                ags_lineitem=ags.get("lineitem"),
                ags_lineitems=ags.get("lineitems"),
                ags_scope=json.dumps(list(ags.get("scope") or [])),
            )
        key = (
            LtiResourceLink.platform_id == platform_id,
            LtiResourceLink.deployment_id == deployment_id,
            LtiResourceLink.resource_link_id == resource_link_id,
        )
        for _ in range(2):
            with self._sessions.begin() as session:
                link = session.execute(select(LtiResourceLink).where(*key)).scalar_one_or_none()
                if link is not None:
                    session.execute(update(LtiResourceLink).where(LtiResourceLink.id == link.id).values(**values))
                    return session.get(LtiResourceLink, link.id)  # type: ignore[return-value]
            try:
                with self._sessions.begin() as session:
                    link = LtiResourceLink(
                        platform_id=platform_id,
                        deployment_id=deployment_id,
                        resource_link_id=resource_link_id,
                        created_at=now,
                        **values,
                    )
                    session.add(link)
                return link
            except IntegrityError:  # made by a concurrent launch: update it
                continue
        raise RuntimeError("could not store the resource link")

    def save_memberships_url(self, *, platform_id: int, deployment_id: str, context_id: str, url: str) -> None:
        """Stores the context's NRPS memberships URL (or replaces the one an earlier launch gave)."""
        key = (
            LtiContext.platform_id == platform_id,
            LtiContext.deployment_id == deployment_id,
            LtiContext.context_id == context_id,
        )
        for _ in range(2):
            with self._sessions.begin() as session:
                updated = session.execute(
                    update(LtiContext)
                    .where(*key)
                    .values(memberships_url=url, updated_at=utcnow())
                    .execution_options(synchronize_session=False)
                )
                if rowcount(updated):
                    return
            try:
                with self._sessions.begin() as session:
                    session.add(
                        LtiContext(
                            platform_id=platform_id,
                            deployment_id=deployment_id,
                            context_id=context_id,
                            memberships_url=url,
                            updated_at=utcnow(),
                        )
                    )
                return
            except IntegrityError:  # a concurrent launch stored it first: update it
                continue
        raise RuntimeError("could not store the context's memberships URL")

    def memberships_url(self, *, platform_id: int, deployment_id: str, context_id: str) -> str | None:
        """The context's NRPS memberships URL, or None when no launch from it offered one."""
        with self._sessions() as session:
            return session.execute(
                select(LtiContext.memberships_url).where(
                    LtiContext.platform_id == platform_id,
                    LtiContext.deployment_id == deployment_id,
                    LtiContext.context_id == context_id,
                )
            ).scalar_one_or_none()

    def resource_links(self, platform_id: int | None = None) -> list[LtiResourceLink]:
        query = select(LtiResourceLink).order_by(LtiResourceLink.id)
        if platform_id is not None:
            query = query.where(LtiResourceLink.platform_id == platform_id)
        with self._sessions() as session:
            return list(session.execute(query).scalars())

    # -- one-time launch tokens ------------------------------------------------------------------

    def make_launch_token(self, user_id: int, target: str, *, ttl_s: float = LAUNCH_TOKEN_TTL_S) -> str:
        """A one-time token (256 random bits; stored as SHA-256) that signs `user_id` in and opens
        `target` within `ttl_s` seconds. Drops expired ones."""
        token = secrets.token_urlsafe(32)
        now = utcnow()
        with self._sessions.begin() as session:
            session.execute(delete(LtiLaunchToken).where(LtiLaunchToken.expires_at < now))
            session.add(
                LtiLaunchToken(
                    token_hash=sha256_hex(token),
                    user_id=user_id,
                    target=target,
                    expires_at=now + timedelta(seconds=ttl_s),
                )
            )
        return token

    def peek_launch_token(self, token: str) -> tuple[int, str] | None:
        """(user id, target) of an unexpired, unused token, without using it."""
        with self._sessions() as session:
            row = session.get(LtiLaunchToken, sha256_hex(token))
            if row is None or row.expires_at <= utcnow():
                return None
            return row.user_id, row.target

    def use_launch_token(self, token: str) -> tuple[int, str] | None:
        """Uses a token once: (user id, target), or None when unknown, expired or used."""
        token_hash = sha256_hex(token)
        with self._sessions.begin() as session:
            row = session.get(LtiLaunchToken, token_hash)
            if row is None:
                return None
            found = row.user_id, row.target, row.expires_at
            taken = session.execute(
                delete(LtiLaunchToken)
                .where(LtiLaunchToken.token_hash == token_hash)
                .execution_options(synchronize_session=False)
            )
            if rowcount(taken) != 1 or found[2] <= utcnow():
                return None
            return found[0], found[1]
