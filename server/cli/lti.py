"""`remat-judge lti`: register, list and remove LTI 1.3 platforms.

Registrations live in the database, so every running server process sees a change on its next
request (no restart).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer
from rich.markup import escape
from rich.table import Table

from server.cli.common import EXIT_USAGE, console, engine_for, err

lti_app = typer.Typer(
    help="LTI 1.3 platforms (Canvas, Moodle, Blackboard, D2L): register, list, remove.", no_args_is_help=True
)


def _store(data_dir: Path | None):
    from server.store.lti_store import LtiStore

    return LtiStore(engine_for(data_dir))


def _check_url(option: str, url: str) -> None:
    """Exits with a message unless `url` is an absolute http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        err.print(f"[red]{option}: {url!r} is not an absolute http(s) URL[/]")
        raise typer.Exit(EXIT_USAGE)


@lti_app.command("register")
def register(
    issuer: Annotated[str, typer.Option("--issuer", help="the platform's issuer (iss)")],
    client_id: Annotated[str, typer.Option("--client-id", help="the client id the platform gave the tool")],
    deployment_id: Annotated[list[str], typer.Option("--deployment-id", help="a deployment id (repeatable)")],
    auth_login_url: Annotated[str, typer.Option("--auth-login-url", help="the platform's OIDC authorization URL")],
    auth_token_url: Annotated[str, typer.Option("--auth-token-url", help="the platform's OAuth2 token URL")],
    keyset_url: Annotated[str, typer.Option("--keyset-url", help="the platform's public JWKS URL")],
    token_audience: Annotated[
        str | None,
        typer.Option("--token-audience", help="aud of client assertions when not the token URL (D2L Brightspace)"),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None,
) -> None:
    """Register a platform, or update the one with this issuer and client id (its URLs are
    replaced, deployment ids added). Running servers see it at once."""
    if not issuer or not client_id or not all(d.strip() for d in deployment_id):
        err.print("[red]--issuer, --client-id and --deployment-id may not be empty[/]")
        raise typer.Exit(EXIT_USAGE)
    for option, url in (
        ("--auth-login-url", auth_login_url),
        ("--auth-token-url", auth_token_url),
        ("--keyset-url", keyset_url),
    ):
        _check_url(option, url)
    view = _store(data_dir).register(
        issuer=issuer,
        client_id=client_id,
        deployment_ids=[d.strip() for d in deployment_id],
        auth_login_url=auth_login_url,
        auth_token_url=auth_token_url,
        keyset_url=keyset_url,
        token_audience=token_audience,
    )
    console.print(
        f"registered {view.issuer} (client id {view.client_id}); deployments: {', '.join(view.deployment_ids)}"
    )
    advice = _advice(data_dir, auth_token_url)
    if advice:  # launches work, but grades would be refused: said now, not found later in a log
        err.print(f"[yellow]grades will not reach this platform yet: {escape(advice)}[/]")


def _advice(data_dir: Path | None, token_url: str) -> str | None:
    """`server.lti.ags.network_advice` for the token URL with the deployment's allowed networks."""
    from server.lti.ags import network_advice
    from server.settings import Settings

    return network_advice(token_url, Settings().lti_allow_networks)  # the environment's (no folder is read)


@lti_app.command("registration-url")
def registration_url(
    expires_minutes: Annotated[
        int, typer.Option("--expires-minutes", min=1, max=7 * 24 * 60, help="how long the URL can be used")
    ] = 60,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="the judge's public URL (default REMAT_JUDGE_PUBLIC_URL)")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None,
) -> None:
    """Make a one-time LTI Dynamic Registration URL (Moodle 4.x: "Tool URL" under Manage tools).
    The URL is the last line printed; it works once, for --expires-minutes."""
    from server.settings import Settings
    from server.store.lti_store import RegistrationStore

    base = (base_url or Settings().public_url or "").rstrip("/")
    if not base:
        err.print(
            "[red]the judge's public URL is needed: set REMAT_JUDGE_PUBLIC_URL (https://...) or pass --base-url[/]"
        )
        raise typer.Exit(EXIT_USAGE)
    _check_url("--base-url", base)
    if not base.startswith("https://"):
        err.print("[yellow]the public URL is not https: LMSs refuse such tools outside a local test[/]")
    token = RegistrationStore(engine_for(data_dir)).issue(created_by="cli", expires_minutes=expires_minutes)
    console.print(f"valid once, for {expires_minutes} minutes; paste it into the LMS's tool registration:")
    print(f"{base}/lti/dynamic-registration/{token}")


@lti_app.command("list")
def list_platforms(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (one list)")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None,
) -> None:
    """List registered platforms: issuer, client id, deployments, URLs."""
    platforms = _store(data_dir).platforms()
    if as_json:
        import json

        print(
            json.dumps(
                [
                    {
                        "issuer": p.issuer,
                        "client_id": p.client_id,
                        "deployment_ids": list(p.deployment_ids),
                        "auth_login_url": p.auth_login_url,
                        "auth_token_url": p.auth_token_url,
                        "keyset_url": p.keyset_url,
                        "token_audience": p.token_audience,
                    }
                    for p in platforms
                ]
            )
        )
        return
    table = Table(show_header=True, header_style="bold")
    for column in ("issuer", "client id", "deployments", "auth login URL", "token URL", "keyset URL", "token audience"):
        table.add_column(column, overflow="fold")
    for p in platforms:
        table.add_row(
            p.issuer,
            p.client_id,
            ", ".join(p.deployment_ids),
            p.auth_login_url,
            p.auth_token_url,
            p.keyset_url,
            p.token_audience or "(token URL)",
        )
    console.print(table)


@lti_app.command("remove")
def remove(
    issuer: Annotated[str, typer.Argument(help="the platform's issuer")],
    client_id: Annotated[str, typer.Argument(help="its client id")],
    data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None,
) -> None:
    """Remove a platform registration (its deployments and resource links too; accounts stay).
    Its launches are refused from the next request on."""
    if not _store(data_dir).remove(issuer, client_id):
        err.print(f"[red]no platform {issuer!r} with client id {client_id!r}[/]")
        raise typer.Exit(EXIT_USAGE)
    console.print(f"removed {issuer} (client id {client_id})")
