"""`remat-judge courses board KEY names|anonymous` and `courses board-show KEY SLUG`: a course's class
boards (`server.store.boards`) from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from server.cli.common import EXIT_USAGE, console, engine_for, err
from server.cli.courses import find_course
from server.store.boards import BoardStore, ranked

DataDir = Annotated[Path | None, typer.Option(help="the server's data folder")]


def board_names(
    key: Annotated[str, typer.Argument(help="the course")],
    show: Annotated[
        str, typer.Argument(help="names: students see each other's display names; anonymous (the default)")
    ],
    data_dir: DataDir = None,
) -> None:
    """Whether the course's boards show its students each other's display names."""
    if show not in ("names", "anonymous"):
        err.print("say names or anonymous")
        raise typer.Exit(EXIT_USAGE)
    engine = engine_for(data_dir)
    course = find_course(engine, key)
    BoardStore(engine).set_board_names(course.id, show == "names")
    console.print(
        f"{escape(course.key)}: boards show students " + ("display names" if show == "names" else "their own row only")
    )


def board_show(
    key: Annotated[str, typer.Argument(help="the course")],
    slug: Annotated[str, typer.Argument(help="the assignment's problem")],
    data_dir: DataDir = None,
) -> None:
    """Print a course's board of one problem as its staff see it: each student's best score and point."""
    engine = engine_for(data_dir)
    course = find_course(engine, key)
    table = Table(title=f"{course.key}: {slug}")
    entries = BoardStore(engine).board(slug, course.id)
    memory = "backward peak bytes" if any(e.peak for e in entries) else "saved bytes"
    for column in ("rank", "student", "score", "verdict", memory, "recompute FLOPs"):
        table.add_column(column, justify="right" if column not in ("student", "verdict") else "left")
    for rank, e in ranked(entries):
        table.add_row(
            str(rank),
            escape(e.display_name),
            f"{e.score:.4f}",
            e.verdict,
            f"{e.memory_bytes:,}" if e.memory_bytes is not None else "-",
            (f"{e.recompute_flops:,}" if e.recompute_flops is not None else "-")
            + (" (beyond the optimum)" if e.beyond_optimum else ""),
        )
    console.print(table)
