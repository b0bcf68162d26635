"""`remat-judge problems frontier SLUG`: each case's frontier, budget against least recomputation,
as tables (`graders.budget.frontier_table`, run in its own process: it imports the reference and
JAX, which the CLI's process never does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from server.cli.common import EXIT_USAGE, console, err, settings_for


def problems_frontier(
    slug: Annotated[str, typer.Argument(help="the problem package")],
    time_limit: Annotated[float, typer.Option(help="seconds per solve (HiGHS)")] = 10.0,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Print, for each case, every budget where more bytes buy less recomputation: the saved
    residual bytes, the least recompute FLOPs any checkpoint policy reaches within them (solved
    with scipy.optimize.milp; "at least" where a solve stopped at its time limit) and how many
    values it keeps; then the reference and its SCHEDULES as measured (residual bytes, backward
    peak, recomputation: a budget of the peak takes the best that fits). Choose `memory.budgets`
    between two rows. Runs the reference here."""
    settings = settings_for(problems_dir=problems_dir)
    folder = settings.problems_dir / slug
    if not (folder / "problem.toml").is_file() or not (folder / "reference.py").is_file():
        err.print(f"no problem.toml and reference.py in {folder}")
        raise typer.Exit(EXIT_USAGE)
    command = [sys.executable, "-m", "graders.budget.frontier_table", str(folder), "--time-limit", str(time_limit)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        err.print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "frontier failed", markup=False)
        raise typer.Exit(1)
    for case in json.loads(done.stdout):
        title = f"{slug}: case {case['case']!r} (forward pass {case['forward_flops']:,} FLOPs)"
        console.print(_limits_line(case), markup=False)
        if case["points"]:
            console.print(_frontier_table(title, case["points"]))
        if case["schedules"]:
            console.print(_schedules_table(f"{title}: the schedules measured", case["schedules"]))


def _limits_line(case: dict[str, Any]) -> str:
    """What a budget of this case must stay below, and on a budget of the peak the proven bound."""
    peak = case.get("budget_of") == "peak"
    limit = case["floor_bytes"] + (case["cotangent_bytes"] if peak else 0)
    what = f"floor {case['floor_bytes']:,} + cotangents {case['cotangent_bytes']:,}" if peak else "its floor"
    line = (
        f"case {case['case']!r}: a program that recomputes nothing fits {limit:,} bytes "
        f"({'backward peak' if peak else 'residuals'}; {what}): a budget must be below it"
    )
    if case.get("budget_bytes") is not None:
        line += f"; the budget is {case['budget_bytes']:,}"
    if case.get("bound_flops") is not None:
        line += f"; no schedule of the reference's program within it recomputes less than {case['bound_flops']:,} FLOPs"
    return line


def _frontier_table(title: str, points: list[dict[str, Any]]) -> Table:
    """The residual-bytes frontier: budget against the least recomputation solved for."""
    table = Table(title=title)
    for column in ("saved residual bytes", "least recompute FLOPs", "values kept", "solve s"):
        table.add_column(column, justify="right")
    for p in points:
        flops = f"{p['flops']:,}" if p["optimal"] else f"at least {p['bound_flops']:,} (found {p['flops']:,})"
        table.add_row(f"{p['bytes']:,}", flops, str(p["saved"]), f"{p['seconds']:.2f}")
    return table


def _schedules_table(title: str, schedules: list[dict[str, Any]]) -> Table:
    """The reference and its SCHEDULES as measured: a budget of the peak takes the best that fits."""
    table = Table(title=title)
    table.add_column("schedule")
    for column in ("residual bytes", "backward peak bytes", "recompute FLOPs"):
        table.add_column(column, justify="right")
    for s in sorted(schedules, key=lambda s: (s["peak_bytes"], s["flops"])):
        table.add_row(s["label"], f"{s['bytes']:,}", f"{s['peak_bytes']:,}", f"{s['flops']:,}")
    return table
