"""Accounts for the web pages: argon2 password hashes (pwdlib), server-side sessions
(`server.store.accounts`) named by the signed session cookie (Starlette's SessionMiddleware), CSRF
tokens on every form, and the request's principal (`server.authz`: site role and course roles).

Everything here reads the app's services through `get_services`, so a test's dependency override
reaches it."""

from __future__ import annotations

import re
import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from pwdlib import PasswordHash

from server.authz import ANONYMOUS, Principal
from server.deps import ServicesDep
from server.services import Services
from server.store.accounts import SessionStore, UserRecord

EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,190}\.[^@\s]{2,}$")
MIN_PASSWORD_CHARS = 10


class _Passwords:
    """The password hasher in use and a hash of a random password made with it, to verify against
    when an email is unknown, so a sign-in does the same work (about 0.1 s with pwdlib's
    recommended argon2id) whether or not the account exists."""

    def __init__(self, hasher: PasswordHash):
        self.hasher = hasher
        self.dummy_hash = hasher.hash(secrets.token_urlsafe(16))


_PASSWORDS = _Passwords(PasswordHash.recommended())  # argon2id with pwdlib's recommended parameters


def use_password_hasher(hasher: PasswordHash) -> None:
    """Hashes and verifies passwords with `hasher` from now on, in this process (the fast test
    layer uses a cheap argon2id, as Django's testing docs advise for a slow hasher). Hashes made
    with other parameters still verify and are re-hashed at the next sign-in."""
    global _PASSWORDS
    _PASSWORDS = _Passwords(hasher)


def hash_password(password: str) -> str:
    """An argon2id hash of `password` (pwdlib's PHC string)."""
    return _PASSWORDS.hasher.hash(password)


def verify_password(password: str, password_hash: str) -> tuple[bool, str | None]:
    """(matches, a new hash when the stored one uses outdated parameters, else None)."""
    return _PASSWORDS.hasher.verify_and_update(password, password_hash)


def signup_errors(email: str, display_name: str, password: str) -> list[str]:
    """What is wrong with a sign-up form, in words for the person filling it in."""
    errors = []
    if not EMAIL_RE.match(email):
        errors.append("Enter a valid email address.")
    if not 1 <= len(display_name.strip()) <= 80:
        errors.append("Enter a name of 1 to 80 characters.")
    if len(password) < MIN_PASSWORD_CHARS:
        errors.append(f"Use a password of at least {MIN_PASSWORD_CHARS} characters.")
    if len(password) > 1024:
        errors.append("That password is too long.")
    return errors


def check_password(user: UserRecord | None, password: str) -> tuple[bool, str | None]:
    """`verify_password` against `user`'s hash, or against a dummy hash when `user` is None or
    has no password (`NO_PASSWORD`; always False then): the same work for known and unknown
    emails (no timing oracle)."""
    if user is None or user.password_hash.startswith("!"):
        verify_password(password, _PASSWORDS.dummy_hash)
        return False, None
    return verify_password(password, user.password_hash)


def session_store(services: Services) -> SessionStore | None:
    """The server-side sessions of this app (`Services.sessions`; a test's services may hold None:
    then no session can exist)."""
    return services.sessions


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def sign_in(request: Request, services: Services, user: UserRecord) -> None:
    """Starts a server-side session for `user` (`server.store.accounts`) and a fresh cookie session
    holding its token (the old CSRF token is dropped)."""
    store = session_store(services)
    if store is None:
        raise RuntimeError("no database for web sessions")
    token = store.start(user.id, user_agent=request.headers.get("user-agent", ""), ip=client_ip(request))
    request.session.clear()
    request.session["uid"] = user.id
    request.session["sid"] = token
    request.session["csrf"] = secrets.token_urlsafe(32)
    request.scope["remat_user"] = user
    request.scope.pop("remat_principal", None)


def sign_out(request: Request, services: Services) -> None:
    """Ends this browser's session on the server (a copy of the cookie stops working too)."""
    token = request.session.get("sid")
    store = session_store(services)
    if isinstance(token, str) and store is not None:
        store.revoke(token)
    request.session.clear()
    request.scope["remat_user"] = None
    request.scope.pop("remat_principal", None)


def csrf_token(request: Request) -> str:
    """This session's CSRF token (made on first use)."""
    token = request.session.get("csrf")
    if not token:
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def check_csrf(request: Request, submitted: str | None) -> None:
    """Raises HTTP 403 unless `submitted` is this session's CSRF token."""
    expected = request.session.get("csrf")
    if not expected or not submitted or not secrets.compare_digest(expected, submitted):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "the form has expired or did not come from this site; reload the page and try again",
        )


def user_of(request: Request, services: Services) -> UserRecord | None:
    """The signed-in account, or None: the cookie's session token must name an active server-side
    session of the cookie's account (revoked, expired or unknown: signed out, and the cookie's
    session is cleared). Looked up once per request."""
    if "remat_user" in request.scope:
        return request.scope["remat_user"]
    user = None
    uid, token = request.session.get("uid"), request.session.get("sid")
    store = session_store(services)
    if isinstance(uid, int) and isinstance(token, str) and store is not None:
        if store.user_of(token) == uid:
            user = services.users.get(uid)
        else:
            request.session.pop("uid", None)
            request.session.pop("sid", None)
    request.scope["remat_user"] = user
    return user


def principal_of(request: Request, services: Services) -> Principal:
    """The signed-in account's principal (site role and course roles; `server.authz`), or
    `ANONYMOUS`. Looked up once per request."""
    if "remat_principal" not in request.scope:
        user = user_of(request, services)
        request.scope["remat_principal"] = services.access.principal(user) if user is not None else ANONYMOUS
    principal: Principal = request.scope["remat_principal"]
    return principal


def current_user(request: Request, services: ServicesDep) -> UserRecord | None:
    """FastAPI dependency: `user_of` this request."""
    return user_of(request, services)


def current_principal(request: Request, services: ServicesDep) -> Principal:
    """FastAPI dependency: `principal_of` this request."""
    return principal_of(request, services)


OptionalUser = Annotated[UserRecord | None, Depends(current_user)]
PrincipalDep = Annotated[Principal, Depends(current_principal)]
