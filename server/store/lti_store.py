"""`LtiStore`, the one place that reads and writes the LTI tables (`server.store.lti`): platforms
and their deployments, LTI accounts, resource links and contexts, and (from `LaunchStates`) the
launches' one-time states; and `RegistrationStore`, the one-time Dynamic Registration URLs."""

from __future__ import annotations

import json
import secrets
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from server.store.accounts import NO_PASSWORD, UserRecord, UserStore
from server.store.courses import CourseRole
from server.store.db import rowcount, utcnow
from server.store.lti import (
    MAX_EXPIRY_MINUTES,
    LtiContext,
    LtiDeployment,
    LtiLogin,
    LtiPlatform,
    LtiResourceLink,
    LtiUser,
    PlatformView,
    RegistrationUrl,
    lti_email,
    registration_hash,
)
from server.store.lti_launches import LaunchStates


class LtiStore(LaunchStates):
    """Reads and writes the LTI tables. Thread-safe: one session per call. Reads the database on
    every call (no cache), so every server process sees a registration at once."""

    def __init__(self, engine: Engine):
        super().__init__(engine)
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
        # no password: the account signs in through launches only (`server.web.sessions.check_password`
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


class RegistrationStore:
    """One-time registration URLs. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def issue(self, *, created_by: str, expires_minutes: int = 60) -> str:
        """A new token (shown once); the URL is `<base>/lti/dynamic-registration/<token>`.

        Raises:
            ValueError: `expires_minutes` outside 1 minute to a week.
        """
        if not 1 <= expires_minutes <= MAX_EXPIRY_MINUTES:
            raise ValueError(f"a registration URL lasts 1 to {MAX_EXPIRY_MINUTES} minutes")
        token = secrets.token_urlsafe(32)
        now = utcnow()
        with self._sessions.begin() as session:
            session.add(
                RegistrationUrl(
                    token_hash=registration_hash(token),
                    created_by=created_by[:254],
                    created_at=now,
                    expires_at=now + timedelta(minutes=expires_minutes),
                )
            )
        return token

    def usable(self, token: str) -> bool:
        """Whether `token` names an unused, unexpired registration URL."""
        with self._sessions() as session:
            row = session.query(RegistrationUrl).filter_by(token_hash=registration_hash(token)).one_or_none()
        return row is not None and row.used_at is None and row.expires_at > utcnow()

    def spend(self, token: str) -> bool:
        """Marks `token` used, once (a conditional UPDATE: two platforms racing with one URL
        cannot both register); False when it is unknown, used or expired."""
        now = utcnow()
        with self._sessions.begin() as session:
            done = session.execute(
                update(RegistrationUrl)
                .where(
                    RegistrationUrl.token_hash == registration_hash(token),
                    RegistrationUrl.used_at.is_(None),
                    RegistrationUrl.expires_at > now,
                )
                .values(used_at=now)
                .execution_options(synchronize_session=False)
            )
            return rowcount(done) == 1

    def unspend(self, token: str) -> None:
        """Makes a spent token usable again when its registration failed before anything was
        stored (the administrator fixes the cause, e.g. an allowed network, and retries)."""
        with self._sessions.begin() as session:
            session.execute(
                update(RegistrationUrl)
                .where(RegistrationUrl.token_hash == registration_hash(token), RegistrationUrl.platform_id.is_(None))
                .values(used_at=None)
                .execution_options(synchronize_session=False)
            )

    def record_platform(self, token: str, platform_id: int) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(RegistrationUrl)
                .where(RegistrationUrl.token_hash == registration_hash(token))
                .values(platform_id=platform_id)
                .execution_options(synchronize_session=False)
            )
