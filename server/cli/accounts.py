"""`remat-judge users ...` (accounts of the web judge and their site role) and `remat-judge clients
...` (API clients: keys, scopes, callbacks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from graders.problems.problem import ProblemRepository
from server.cli.common import EXIT_USAGE, console, engine_for, err, settings_for, user_store

users_app = typer.Typer(help="Accounts of the web judge.", no_args_is_help=True)
clients_app = typer.Typer(
    help="API clients (learning platforms, course scripts): keys, scopes, callbacks.", no_args_is_help=True
)


@users_app.command("list")
def users_list(data_dir: Annotated[Path | None, typer.Option(help="database folder")] = None) -> None:
    """List accounts: email (an LTI account's sign-in email is lti-…@lti.invalid; its LMS email
    beside it), name, site role, created."""
    table = Table()
    for column in ("email", "LMS email", "name", "site role", "created (UTC)"):
        table.add_column(column, overflow="fold")
    for u in user_store(data_dir).all():
        table.add_row(
            escape(u.email),
            escape(u.contact_email or ""),
            escape(u.display_name),
            u.role,
            u.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)


@users_app.command("role")
def users_role(
    email: Annotated[str, typer.Argument(help="the account's sign-in email (users list shows them)")],
    role: Annotated[str, typer.Argument(help="admin or user")],
    data_dir: Annotated[Path | None, typer.Option(help="database folder")] = None,
) -> None:
    """Set an account's site role: admin (manages problems, API clients, LMS platforms, accounts
    and every course) or user. Teaching one course is a course role instead: `courses enroll KEY
    EMAIL --role staff`, or the LMS's Instructor role at launch."""
    from server.store.accounts import SiteRole

    try:
        site_role = SiteRole(role)
    except ValueError:
        hint = (
            " (an instructor of a course is staff of it: courses enroll KEY EMAIL --role staff)"
            if role in ("instructor", "staff")
            else ""
        )
        err.print(f"the site role is admin or user{hint}", soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    if not user_store(data_dir).set_role(email, site_role):
        err.print(f"no account {escape(email)!r}; it is made by signing up on the web page")
        raise typer.Exit(EXIT_USAGE)
    console.print(f"{escape(email)} is now {'an' if site_role == SiteRole.ADMIN else 'a'} {site_role.value}")


@clients_app.command("create")
def clients_create(
    name: Annotated[str, typer.Argument(help="a name for the client (unique)")],
    problems: Annotated[
        str | None, typer.Option(help="comma-separated problem slugs it may submit to (default: all)")
    ] = None,
    callback_allow: Annotated[
        list[str] | None, typer.Option("--callback-allow", help="URL prefix its callbacks may go to (repeatable)")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder (checks --problems)")] = None,
) -> None:
    """Create an API client and print, once, as JSON: client_id, api_key, callback_secret.

    The key is stored hashed and cannot be shown again; revoke and recreate to replace it.
    """
    import json
    import re

    from server.delivery.targets import check_prefix
    from server.store.accounts import ClientStore

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", name):
        err.print("[red]a client name is letters, digits, '_', '.', '-' (up to 64), starting with a letter or digit[/]")
        raise typer.Exit(EXIT_USAGE)
    scope = [p.strip() for p in problems.split(",") if p.strip()] if problems is not None else None
    prefixes = list(callback_allow or [])
    for prefix in prefixes:
        try:
            check_prefix(prefix)
        except ValueError as exc:
            err.print(f"[red]--callback-allow: {exc}[/]")
            raise typer.Exit(EXIT_USAGE) from None
    if scope is not None:
        known = set(ProblemRepository(settings_for(problems_dir=problems_dir).problems_dir).slugs())
        unknown = [p for p in scope if p not in known]
        if unknown:
            err.print(f"[red]unknown problems: {', '.join(unknown)}[/]")
            raise typer.Exit(EXIT_USAGE)
    try:
        record, api_key = ClientStore(engine_for(data_dir)).create(name, problems=scope, callback_allow=prefixes)
    except ValueError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    print(json.dumps({"client_id": record.name, "api_key": api_key, "callback_secret": record.callback_secret}))


@clients_app.command("list")
def clients_list(data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None) -> None:
    """List API clients: name, key prefix, problems, callback prefixes, created, revoked."""
    from server.store.accounts import ClientStore

    table = Table(show_header=True, header_style="bold")
    for column in ("name", "key", "problems", "callbacks to", "created", "revoked"):
        table.add_column(column, overflow="fold")
    for c in ClientStore(engine_for(data_dir)).all():
        table.add_row(
            c.name,
            c.key_prefix + "…",
            ", ".join(c.problem_scope) if c.problem_scope is not None else "all",
            ", ".join(c.callback_prefixes) or "-",
            c.created_at.strftime("%Y-%m-%d %H:%M UTC"),
            c.revoked_at.strftime("%Y-%m-%d %H:%M UTC") if c.revoked_at else "",
        )
    console.print(table)


@clients_app.command("revoke")
def clients_revoke(
    name: Annotated[str, typer.Argument(help="the client's name")],
    data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None,
) -> None:
    """Revoke a client's key (at once, for every server process sharing the database)."""
    from server.store.accounts import ClientStore

    if not ClientStore(engine_for(data_dir)).revoke(name):
        err.print(f"[red]no active client named {name!r}[/]")
        raise typer.Exit(EXIT_USAGE)
    console.print(f"revoked {name}")
