"""What every `remat-judge` command shares: its Rich consoles, exit codes, the settings with each
folder resolved and printed, and the deployment's database (migrated, never created by mistake)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from server.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from server.store.accounts import UserStore

PIPED_WIDTH = 200  # columns a table may use when the output is not a terminal


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr). On a terminal Rich measures it; piped or captured (a
    script, `| grep`, CI), Rich would assume 80 columns and wrap every table row over several
    lines, so tables get `PIPED_WIDTH` columns there (`COLUMNS` still wins when set)."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not (hasattr(stream, "isatty") and stream.isatty()) and "COLUMNS" not in os.environ
    return Console(stderr=stderr, width=PIPED_WIDTH if piped else None)


console = make_console()
err = make_console(stderr=True)

EXIT_ACCEPTED, EXIT_REJECTED, EXIT_USAGE = 0, 1, 2


def quietly(call: Callable[[], object]) -> None:
    """Runs `call`, ignoring its failure (the grading that follows reports it)."""
    try:
        call()
    except Exception:  # noqa: BLE001 - a warm-up only: the grading that follows reports any failure
        pass


NOT_USED: Any = object()  # a folder the command does not use (not resolved, not printed)


def settings_for(data_dir: Path | None = NOT_USED, problems_dir: Path | None = NOT_USED) -> Settings:
    """The settings, with each folder the command uses resolved (its flag, else the environment
    variable, else the working directory: `server.platform.folders`) to an absolute path and printed as one
    dim line on stderr, so stdout (JSON, tables) stays clean. Pass None for a folder the command
    uses without a flag; leave it out for a folder the command does not use."""
    from server.platform.folders import folder

    overrides: dict[str, Any] = {}
    if data_dir is not NOT_USED and data_dir is not None:
        overrides["data_dir"] = data_dir
    if problems_dir is not NOT_USED and problems_dir is not None:
        overrides["problems_dir"] = problems_dir
    settings = Settings(**overrides)
    resolved: dict[str, Path] = {}
    for role, given in (("problems", problems_dir), ("data", data_dir)):
        if given is NOT_USED:
            continue
        used = folder(role, getattr(settings, f"{role}_dir"), flag_given=given is not None)  # type: ignore[arg-type]
        resolved[f"{role}_dir"] = used.path
        if settings.log_format == "json":  # JSON logs: every line of stderr is one JSON object
            import json
            from datetime import datetime

            now = datetime.now()  # the time format of the JSON log lines (logging's asctime)
            print(
                json.dumps(
                    {
                        "time": f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}",
                        "level": "INFO",
                        "logger": "remat_judge.cli",
                        "message": used.describe(),
                    }
                ),
                file=sys.stderr,
                flush=True,
            )
        else:
            err.print(f"[dim]{escape(used.describe())}[/]", soft_wrap=True, highlight=False)
    return settings.model_copy(update=resolved)


def engine_for(data_dir: Path | None) -> Engine:
    """The deployment's database, migrated to the latest revision; exits with a message (not an
    empty new database) when there is none at that place."""
    from server.store import migrate
    from server.store.db import make_engine

    url = settings_for(data_dir).resolved_database_url
    try:
        revision = migrate.current(url)
    except Exception as exc:  # noqa: BLE001 - unreachable or malformed
        err.print(f"[red]cannot open the database: {exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    if revision is None:
        err.print(
            f"[red]no judge database at {url.split('@')[-1]}: run this in the folder the server runs in (or "
            f"give --data-dir / REMAT_JUDGE_DATABASE_URL), or create it with `remat-judge db upgrade`[/]",
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_USAGE)
    migrate.upgrade(url)
    return make_engine(url)


def user_store(data_dir: Path | None) -> UserStore:
    from server.store.accounts import UserStore

    return UserStore(engine_for(data_dir))
