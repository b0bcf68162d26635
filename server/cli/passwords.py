"""`remat-judge users reset-password EMAIL`: an instructor or administrator sets a new password for
an account (students have no email-based reset: the judge sends no mail) and ends every session
of that account."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from server.cli.common import EXIT_USAGE, console, engine_for, err


def reset_password(
    email: Annotated[str, typer.Argument(help="the account's email")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="read the new password from standard input instead of making one")
    ] = False,
    data_dir: Annotated[Path | None, typer.Option(help="database folder")] = None,
) -> None:
    """Set a new password for an account and end all its sessions; prints a generated password
    once (16 random URL-safe characters) unless one is read from standard input."""
    from server.settings import Settings
    from server.store.accounts import SessionStore, UserStore
    from server.web.sessions import MIN_PASSWORD_CHARS, hash_password

    engine = engine_for(data_dir)
    users = UserStore(engine)
    user = users.by_email(email)
    if user is None:
        err.print(f"[red]no account with the email {escape(email)!r}[/]")
        raise typer.Exit(EXIT_USAGE)
    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else secrets.token_urlsafe(12)
    if len(password) < MIN_PASSWORD_CHARS:
        err.print(f"[red]use a password of at least {MIN_PASSWORD_CHARS} characters[/]")
        raise typer.Exit(EXIT_USAGE)
    users.update_password_hash(user.id, hash_password(password))
    ended = SessionStore(engine, max_age_s=Settings().session_max_age_s).revoke_all(user.id)
    console.print(f"new password set for {escape(user.email)}; {ended} session(s) ended")
    if not password_stdin:
        print(password)  # alone on its line, for scripts; shown once
