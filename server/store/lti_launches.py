"""The launch states of LTI: login initiations (`lti_logins`), accepted nonces (`lti_nonces`)
and one-time launch tokens (`lti_launch_tokens`), each used once. `LtiStore` has these methods."""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from server.store.db import rowcount, utcnow
from server.store.lti import (
    LAUNCH_TOKEN_TTL_S,
    LOGIN_TTL_S,
    LtiLaunchToken,
    LtiLogin,
    LtiNonce,
    PendingLogin,
    sha256_hex,
)


class LaunchStates:
    """Reads and writes the one-time states of launches. Thread-safe: one session per call."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

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
