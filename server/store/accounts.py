"""Accounts of the web judge (`UserRecord`, `UserStore`: site roles, password hashes, LTI accounts
without a password) and API clients (`ApiClientRecord`, `ClientStore`: keys stored hashed, scopes,
callback prefixes, revocation) and web sessions (`WebSession`, `SessionStore`, migration 0008):
what a signed-in browser's cookie points to.

The session cookie (Starlette's signed SessionMiddleware cookie) carries a random session token
(256 bits) and the account id; the table `web_sessions` keeps the token's SHA-256 with its
account, times, user agent and address. A session counts only while its row exists, is not
revoked and was made less than `session_max_age_s` ago, so signing out, ending a session from the
sessions page or an instructor's `remat-judge users reset-password` ends it at once, even for a
copy of the cookie (a signed cookie alone cannot be taken back).
"""

from __future__ import annotations

import enum
import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    ForeignKey,
    Integer,
    String,
    Text,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.store.db import Base, UTCDateTime, enum_column, rowcount, utcnow

# The password hash of an account that has no password (LTI accounts sign in through launches):
# no hash format starts with "!", so nothing verifies against it (`server.web.sessions.check_password`).
NO_PASSWORD = "!no-password"


class SiteRole(enum.StrEnum):
    """An account's role on the whole judge (`server.authz`): a plain `user` (what they may do in
    a course comes from their enrollment's `CourseRole`), or an `admin`, who manages problems,
    API clients, LMS platforms, accounts and every course. Only `remat-judge users role` makes
    an admin; an LMS launch never does."""

    USER = "user"
    ADMIN = "admin"


class UserRecord(Base):
    """An account of the web judge. `password_hash` is an argon2 hash (pwdlib), or
    `NO_PASSWORD` for an account that signs in through LTI launches only.

    Attributes:
        email: the sign-in email, unique and lower-cased; an LTI account's is a synthetic
            `lti-<hash>@lti.invalid` (RFC 2606), so it never holds an address a person could
            sign up with.
        contact_email: for an LTI account, the email its platform sent (shown to course staff,
            matched when staff name a student by email); None otherwise.
        role: the site role (`SiteRole`); course roles live on enrollments.
    """

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    email: Mapped[str] = mapped_column(String(254), unique=True, index=True)
    display_name: Mapped[str] = mapped_column(String(80))
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[SiteRole] = mapped_column(enum_column(SiteRole, "user_role"), default=SiteRole.USER)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    contact_email: Mapped[str | None] = mapped_column(String(254), nullable=True)


class ApiClientRecord(Base):
    """An API client (a learning platform's plug-in, a course script): `remat-judge clients create`.

    Attributes:
        key_hash: SHA-256 (hex) of its API key; the key itself is shown once and never stored.
        key_prefix: the key's first characters, to recognise it in listings.
        callback_secret: signs its callbacks (HMAC-SHA256); kept, since signing needs it.
        problems: JSON list of the problem slugs it may submit to; None: every problem.
        callback_allow: JSON list of URL prefixes its callbacks may go to.
        revoked_at: set when revoked; its key stops working at once.
    """

    __tablename__ = "api_clients"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    key_prefix: Mapped[str] = mapped_column(String(16))
    callback_secret: Mapped[str] = mapped_column(String(128))
    problems: Mapped[str | None] = mapped_column(Text, nullable=True)
    callback_allow: Mapped[str] = mapped_column(Text, default="[]")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    @property
    def problem_scope(self) -> list[str] | None:
        return None if self.problems is None else list(json.loads(self.problems))

    @property
    def callback_prefixes(self) -> list[str]:
        return list(json.loads(self.callback_allow or "[]"))


class ClientStore:
    """API clients: created with a random key shown once (stored as its SHA-256), listed, revoked."""

    KEY_PREFIX = "rjk_"

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @staticmethod
    def hash_key(api_key: str) -> str:
        """SHA-256 (hex) of a key: keys are 256 random bits, so a fast hash is enough (no
        dictionary to guess from), and it lets a request find its client by one indexed lookup."""
        return hashlib.sha256(api_key.encode("utf-8")).hexdigest()

    def create(
        self, name: str, *, problems: list[str] | None = None, callback_allow: list[str] | None = None
    ) -> tuple[ApiClientRecord, str]:
        """Stores a new client; returns it and its API key (the only time the key exists in clear).

        Raises:
            ValueError: the name is taken.
        """
        api_key = self.KEY_PREFIX + secrets.token_urlsafe(32)
        record = ApiClientRecord(
            name=name,
            key_hash=self.hash_key(api_key),
            key_prefix=api_key[:10],
            callback_secret="rjs_" + secrets.token_urlsafe(32),
            problems=None if problems is None else json.dumps(sorted(set(problems))),
            callback_allow=json.dumps(list(callback_allow or [])),
            created_at=utcnow(),
        )
        try:
            with self._sessions.begin() as session:
                session.add(record)
        except IntegrityError:
            raise ValueError(f"a client named {name!r} exists already") from None
        return record, api_key

    def by_key(self, api_key: str) -> ApiClientRecord | None:
        """The client whose key this is, unless revoked."""
        with self._sessions() as session:
            return session.execute(
                select(ApiClientRecord).where(
                    ApiClientRecord.key_hash == self.hash_key(api_key), ApiClientRecord.revoked_at.is_(None)
                )
            ).scalar_one_or_none()

    def get(self, client_id: int) -> ApiClientRecord | None:
        with self._sessions() as session:
            return session.get(ApiClientRecord, client_id)

    def all(self) -> list[ApiClientRecord]:
        with self._sessions() as session:
            return list(session.execute(select(ApiClientRecord).order_by(ApiClientRecord.created_at)).scalars())

    def revoke(self, name: str) -> bool:
        """Revokes a client's key at once; False when there is no such (unrevoked) client."""
        with self._sessions.begin() as session:
            result = session.execute(
                update(ApiClientRecord)
                .where(ApiClientRecord.name == name, ApiClientRecord.revoked_at.is_(None))
                .values(revoked_at=utcnow())
                .execution_options(synchronize_session=False)
            )
            return rowcount(result) > 0


class UserStore:
    """Reads and writes accounts. Emails are stored lower-cased."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create(
        self,
        *,
        email: str,
        display_name: str,
        password_hash: str,
        role: SiteRole = SiteRole.USER,
        contact_email: str | None = None,
    ) -> UserRecord:
        """Stores a new account.

        Raises:
            ValueError: the email is taken.
        """
        record = UserRecord(
            email=email.lower(),
            display_name=display_name,
            password_hash=password_hash,
            role=role,
            contact_email=contact_email,
            created_at=utcnow(),
        )
        try:
            with self._sessions.begin() as session:
                session.add(record)
        except IntegrityError:
            raise ValueError(f"an account for {email} exists already") from None
        return record

    def by_email(self, email: str) -> UserRecord | None:
        with self._sessions() as session:
            return session.execute(select(UserRecord).where(UserRecord.email == email.lower())).scalar_one_or_none()

    def get(self, user_id: int) -> UserRecord | None:
        with self._sessions() as session:
            return session.get(UserRecord, user_id)

    def set_role(self, email: str, role: SiteRole) -> bool:
        """Sets an account's site role; False when there is no such account."""
        with self._sessions.begin() as session:
            result = session.execute(update(UserRecord).where(UserRecord.email == email.lower()).values(role=role))
            return rowcount(result) > 0

    def all(self) -> list[UserRecord]:
        with self._sessions() as session:
            return list(session.execute(select(UserRecord).order_by(UserRecord.created_at)).scalars())

    def update_password_hash(self, user_id: int, password_hash: str) -> None:
        with self._sessions.begin() as session:
            session.execute(update(UserRecord).where(UserRecord.id == user_id).values(password_hash=password_hash))


TOUCH_EVERY_S = 60  # last_seen_at is written at most once a minute per session


def token_hash(token: str) -> str:
    """SHA-256 (hex) of a session token: what the table stores (the token is 256 random bits)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class WebSession(Base):
    """One signed-in browser."""

    __tablename__ = "web_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # SHA-256 of the token
    user_id: Mapped[int] = mapped_column(Integer, ForeignKey("users.id", name="fk_web_sessions_user"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    user_agent: Mapped[str] = mapped_column(String(200), default="")
    ip: Mapped[str] = mapped_column(String(64), default="")
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


@dataclass(frozen=True)
class SessionView:
    """An active session as its owner sees it (`/account/sessions`); `key` is the row id."""

    key: str
    created_at: datetime
    last_seen_at: datetime
    user_agent: str
    ip: str


class SessionStore:
    """Reads and writes `web_sessions`. Thread-safe: one database session per call.

    Args:
        engine: the database.
        max_age_s: a session ends this long after it was made (`REMAT_JUDGE_SESSION_MAX_AGE_S`).
    """

    def __init__(self, engine: Engine, *, max_age_s: float):
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.max_age_s = max_age_s

    def start(self, user_id: int, *, user_agent: str, ip: str) -> str:
        """A new session for `user_id`; returns its token (for the cookie; stored hashed)."""
        token = secrets.token_urlsafe(32)
        now = utcnow()
        with self._sessions.begin() as session:
            session.add(
                WebSession(
                    id=token_hash(token),
                    user_id=user_id,
                    created_at=now,
                    last_seen_at=now,
                    user_agent=user_agent[:200],
                    ip=ip[:64],
                )
            )
        return token

    def user_of(self, token: str) -> int | None:
        """The account of an active session (not revoked, younger than `max_age_s`), else None.
        Moves `last_seen_at` on at most every `TOUCH_EVERY_S` seconds."""
        now = utcnow()
        key = token_hash(token)
        with self._sessions() as session:
            row = session.get(WebSession, key)
            if row is None or row.revoked_at is not None or row.created_at <= now - timedelta(seconds=self.max_age_s):
                return None
            user_id, seen = row.user_id, row.last_seen_at
        if seen <= now - timedelta(seconds=TOUCH_EVERY_S):
            with self._sessions.begin() as session:
                session.execute(
                    update(WebSession)
                    .where(WebSession.id == key)
                    .values(last_seen_at=now)
                    .execution_options(synchronize_session=False)
                )
        return user_id

    def revoke(self, token: str) -> None:
        """Ends the session of `token` (signing out)."""
        self._revoke(WebSession.id == token_hash(token))

    def revoke_key(self, user_id: int, key: str) -> bool:
        """Ends `user_id`'s session with row id `key` (from the sessions page); False when there is
        no such active session of theirs."""
        return self._revoke(WebSession.id == key, WebSession.user_id == user_id) > 0

    def revoke_all(self, user_id: int, *, except_token: str | None = None) -> int:
        """Ends every session of `user_id` (but `except_token`'s); returns how many."""
        conditions = [WebSession.user_id == user_id]
        if except_token is not None:
            conditions.append(WebSession.id != token_hash(except_token))
        return self._revoke(*conditions)

    def _revoke(self, *conditions) -> int:
        with self._sessions.begin() as session:
            return rowcount(
                session.execute(
                    update(WebSession)
                    .where(*conditions, WebSession.revoked_at.is_(None))
                    .values(revoked_at=utcnow())
                    .execution_options(synchronize_session=False)
                )
            )

    def active(self, user_id: int) -> list[SessionView]:
        """`user_id`'s sessions still in force, newest first."""
        since = utcnow() - timedelta(seconds=self.max_age_s)
        with self._sessions() as session:
            rows = session.execute(
                select(WebSession)
                .where(WebSession.user_id == user_id, WebSession.revoked_at.is_(None), WebSession.created_at > since)
                .order_by(WebSession.last_seen_at.desc())
            ).scalars()
            return [
                SessionView(
                    key=r.id, created_at=r.created_at, last_seen_at=r.last_seen_at, user_agent=r.user_agent, ip=r.ip
                )
                for r in rows
            ]
