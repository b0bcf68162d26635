"""Accounts for the web pages: argon2 password hashes (pwdlib), the signed session cookie
(Starlette's SessionMiddleware), CSRF tokens on every form, roles student and instructor."""

from __future__ import annotations

import re
import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from pwdlib import PasswordHash

from server.db import UserRecord, UserStore

_HASHER = PasswordHash.recommended()  # argon2id with pwdlib's recommended parameters
EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,190}\.[^@\s]{2,}$")
MIN_PASSWORD_CHARS = 10


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(password: str, password_hash: str) -> tuple[bool, str | None]:
    """(matches, a new hash when the stored one uses outdated parameters, else None)."""
    return _HASHER.verify_and_update(password, password_hash)


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


def sign_in(request: Request, user: UserRecord) -> None:
    """Starts a session for `user` (a fresh session: the old CSRF token is dropped)."""
    request.session.clear()
    request.session["uid"] = user.id
    request.session["csrf"] = secrets.token_urlsafe(32)


def sign_out(request: Request) -> None:
    request.session.clear()


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
        raise HTTPException(status.HTTP_403_FORBIDDEN, "the form has expired or did not come from this site; "
                                                       "reload the page and try again")


def users_of(request: Request) -> UserStore:
    return request.app.state.services.users


def current_user(request: Request) -> UserRecord | None:
    """The signed-in account, or None."""
    uid = request.session.get("uid")
    if not isinstance(uid, int):
        return None
    return users_of(request).get(uid)


OptionalUser = Annotated[UserRecord | None, Depends(current_user)]
