"""Accounts on the web: sign-up, sign-in (throttled per account and address), sign-out, and the
sessions page that ends other sessions at once."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from server.deps import ServicesDep
from server.store.accounts import token_hash
from server.web.rendering import render, require_user
from server.web.sessions import (
    OptionalUser,
    check_csrf,
    check_password,
    client_ip,
    hash_password,
    session_store,
    sign_in,
    sign_out,
    signup_errors,
)

router = APIRouter(include_in_schema=False)

# One answer whether or not the email is taken (no account enumeration through sign-up beyond what
# creating an account must reveal: see SECURITY.md).
SIGNUP_REFUSED = (
    "No account was made with these details. If you already have one, sign in (an instructor "
    "can reset a forgotten password)."
)


def _safe_next(target: str | None) -> str:
    """Only same-site paths: never redirect to another host after sign-in."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


@router.get("/signup", response_class=HTMLResponse)
def signup_form(request: Request, user: OptionalUser, next: str = "/") -> HTMLResponse:
    return render(request, "signup.html", user, errors=[], email="", display_name="", next=_safe_next(next))


@router.post("/signup", response_class=HTMLResponse)
def signup(
    request: Request,
    services: ServicesDep,
    email: Annotated[str, Form()] = "",
    display_name: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    check_csrf(request, csrf_token)
    email = email.strip()
    throttle = services.throttle
    wait_s = throttle.retry_after_s(email, client_ip(request))
    if wait_s is not None:  # the sign-in throttle holds here too: sign-up is no way around it
        response = render(
            request,
            "signup.html",
            None,
            email=email,
            display_name=display_name,
            next=_safe_next(next),
            status_code=status.HTTP_429_TOO_MANY_REQUESTS,
            errors=[f"Too many refused attempts; try again in {wait_s} seconds."],
        )
        response.headers["Retry-After"] = str(wait_s)
        return response
    errors = signup_errors(email, display_name, password)
    if not errors:
        try:
            user = services.users.create(
                email=email, display_name=display_name.strip(), password_hash=hash_password(password)
            )
        except ValueError:
            # The email is taken. Sign-up never signs anyone in to an existing account (it would be
            # a password check outside the sign-in throttle); the refusal counts as a failed
            # sign-in for this email and address.
            throttle.failed(email, client_ip(request))
            errors = [SIGNUP_REFUSED]
        else:
            sign_in(request, services, user)
            return RedirectResponse(_safe_next(next), status_code=status.HTTP_303_SEE_OTHER)
    return render(
        request,
        "signup.html",
        None,
        errors=errors,
        email=email,
        display_name=display_name,
        next=_safe_next(next),
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
    )


@router.get("/signin", response_class=HTMLResponse)
def signin_form(request: Request, user: OptionalUser, next: str = "/") -> HTMLResponse:
    return render(request, "signin.html", user, error=None, email="", next=_safe_next(next))


@router.post("/signin", response_class=HTMLResponse)
def signin(
    request: Request,
    services: ServicesDep,
    email: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    check_csrf(request, csrf_token)
    throttle = services.throttle
    wait_s = throttle.retry_after_s(email, client_ip(request))
    if wait_s is not None:  # no password is checked past the limit
        response = render(
            request,
            "signin.html",
            None,
            email=email,
            next=_safe_next(next),
            error=f"Too many failed sign-ins; try again in {wait_s} seconds.",
            status_code=status.HTTP_429_TOO_MANY_REQUESTS,
        )
        response.headers["Retry-After"] = str(wait_s)
        return response
    user = services.users.by_email(email.strip())
    ok, new_hash = check_password(user, password)  # the same work for an unknown email
    if user is None or not ok:
        throttle.failed(email, client_ip(request))
        return render(
            request,
            "signin.html",
            None,
            error="Wrong email or password.",
            email=email,
            next=_safe_next(next),
            status_code=status.HTTP_401_UNAUTHORIZED,
        )
    if new_hash:
        services.users.update_password_hash(user.id, new_hash)
    sign_in(request, services, user)
    return RedirectResponse(_safe_next(next), status_code=status.HTTP_303_SEE_OTHER)


@router.get("/account/sessions", response_class=HTMLResponse)
def account_sessions(request: Request, services: ServicesDep, user: OptionalUser) -> HTMLResponse:
    """The signed-in user's sessions (browsers), with buttons to end the others."""
    user = require_user(user, request)
    store = session_store(services)
    assert store is not None
    current = token_hash(request.session.get("sid", ""))
    return render(request, "sessions.html", user, sessions=store.active(user.id), current=current)


@router.post("/account/sessions/end")
def end_session(
    request: Request,
    services: ServicesDep,
    user: OptionalUser,
    key: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Ends one other session (`key`), or every other one (`key` "others")."""
    user = require_user(user, request)
    check_csrf(request, csrf_token)
    store = session_store(services)
    assert store is not None
    if key == "others":
        store.revoke_all(user.id, except_token=request.session.get("sid"))
    elif not store.revoke_key(user.id, key):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such session")
    return RedirectResponse("/account/sessions", status_code=status.HTTP_303_SEE_OTHER)


@router.post("/signout")
def signout(request: Request, services: ServicesDep, csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    sign_out(request, services)
    return RedirectResponse("/", status_code=status.HTTP_303_SEE_OTHER)
