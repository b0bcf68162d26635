"""`remat-judge db`: the database schema (Alembic migrations, see `server.store.migrate`).

`upgrade` applies the migrations (run it before starting scaled-out API and worker processes;
the embedded server applies them itself at start-up); `current` says where a database is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from server.cli.common import console, err
from server.settings import Settings

db_app = typer.Typer(help="The database schema: apply migrations, show the revision.", no_args_is_help=True)


EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        help="SQLAlchemy URL (postgresql://user:password@host/db or sqlite:///path); default "
        "REMAT_JUDGE_DATABASE_URL, else the SQLite file in the data folder",
        show_default=False,
    ),
]
DataDir = Annotated[Path | None, typer.Option(help="data folder (its remat-judge.db is the default database)")]


def _url(database_url: str | None, data_dir: Path | None) -> str:
    if database_url:
        return database_url
    settings = Settings(data_dir=data_dir) if data_dir is not None else Settings()
    if settings.database_url is None:  # the SQLite file of the data folder: say which folder
        from server.platform.folders import folder

        used = folder("data", settings.data_dir, flag_given=data_dir is not None)
        err.print(f"[dim]{escape(used.describe())}[/]", soft_wrap=True, highlight=False)
    return settings.resolved_database_url


def _shown(url: str) -> str:
    """`url` without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 (an unparsable URL is reported by the command itself)
        return url


@contextlib.contextmanager
def _database_errors(url: str) -> Iterator[None]:
    """Turns a malformed URL (exit 2), an unreachable database and a refused migration (exit 1)
    into a message on stderr and that exit code."""
    from sqlalchemy.exc import ArgumentError, DBAPIError

    from server.store import migrate

    try:
        yield
    except ArgumentError as exc:
        err.print(f"[red]not a database URL:[/] {escape(str(exc))}")
        raise typer.Exit(EXIT_USAGE) from None
    except DBAPIError as exc:
        err.print(f"[red]cannot reach {escape(_shown(url))}:[/] {escape(str(exc.orig or exc))}")
        raise typer.Exit(EXIT_FAILED) from None
    except migrate.MigrationError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(EXIT_FAILED) from None


@db_app.command("upgrade")
def db_upgrade(database_url: DatabaseUrl = None, data_dir: DataDir = None) -> None:
    """Apply the migrations the database lacks; print the revision reached.

    Creates the tables in an empty database and adopts one made before migrations. Safe to run
    from several processes at once (they take turns). Exits 1 when the database is unreachable or
    cannot be migrated (then nothing was changed), 2 for a malformed URL.
    """
    from server.store import migrate

    url = _url(database_url, data_dir)
    with _database_errors(url):
        before = migrate.current(url)
        reached = migrate.upgrade(url)
    change = "already at the latest revision" if before == reached else f"upgraded from {before or 'no revision'}"
    err.print(f"{escape(_shown(url))}: {change}")
    console.print(reached, markup=False, highlight=False)


@db_app.command("current")
def db_current(database_url: DatabaseUrl = None, data_dir: DataDir = None) -> None:
    """Print the database's revision and the code's.

    The database's is "none" before the first upgrade. Exits 0 when the two are the same, 1 when
    they differ (run `remat-judge db upgrade`) or the database is unreachable, 2 for a malformed URL.
    """
    from server.store import migrate

    url = _url(database_url, data_dir)
    with _database_errors(url):
        current = migrate.current(url)
    head = migrate.head()
    console.print(f"database {escape(_shown(url))}: revision {current or 'none'}; code: revision {head}")
    if current is not None and current not in migrate.revisions():
        err.print(f"[red]revision {escape(current)} is unknown to this code: newer code migrated the database[/]")
        raise typer.Exit(EXIT_FAILED)
    if current != head:
        err.print("[yellow]the database is behind the code: run `remat-judge db upgrade`[/]")
        raise typer.Exit(EXIT_FAILED)
