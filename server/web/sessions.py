"""Server-side web sessions (migration 0008): what a signed-in browser's cookie points to.

The cookie (Starlette's signed SessionMiddleware cookie) carries a random session token (256
bits) and the account id; the table `web_sessions` keeps the token's SHA-256 with its account,
times, user agent and address. A session counts only while its row exists, is not revoked and was
made less than `session_max_age_s` ago, so signing out, ending a session from the sessions page or
an instructor's `remat-judge users reset-password` ends it at once, even for a copy of the cookie
(a signed cookie alone cannot be taken back).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ForeignKey, Integer, String, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from server.store.db import Base, UTCDateTime, rowcount, utcnow

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
