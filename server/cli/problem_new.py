"""`remat-judge problems new SLUG`: scaffold a problem package (`graders.problems.scaffold`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from server.cli.common import EXIT_USAGE, console, err, settings_for


def problems_new(
    slug: Annotated[str, typer.Argument(help="the new problem's slug (folder name)")],
    framework: Annotated[
        str | None,
        typer.Option(help="write the reference with a model library, over a parameter pytree: flax, nnx or equinox"),
    ] = None,
    mesh: Annotated[
        str | None,
        typer.Option(help="run it on a mesh of simulated devices, e.g. data=2,model=2 (x split over the first axis)"),
    ] = None,
    budget: Annotated[
        bool, typer.Option("--budget", help="an open problem: a memory budget per case, scored against the optimum")
    ] = False,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Scaffold a problem package with every file, each field commented (with --framework, a
    residual block over a parameter pytree in Flax linen, Flax NNX or Equinox; with --mesh, on a
    mesh of simulated devices; with --budget, an open problem with a memory budget per case)."""
    import re

    from graders.problems.scaffold import scaffold
    from graders.problems.scaffold_frameworks import FRAMEWORKS
    from graders.problems.scaffold_mesh import parse_mesh
    from graders.problems.spec import SLUG_RE

    if not re.match(SLUG_RE, slug):
        err.print(f"{slug!r} is not a valid slug: lowercase letters, digits and underscores, starting with a letter")
        raise typer.Exit(EXIT_USAGE)
    if framework is not None and framework not in FRAMEWORKS:
        err.print(f"--framework {framework!r}: choose one of {', '.join(FRAMEWORKS)}")
        raise typer.Exit(EXIT_USAGE)
    if budget and (framework is not None or mesh is not None):
        err.print("--budget alone: a budget problem's optimum is read from plain JAX on one device")
        raise typer.Exit(EXIT_USAGE)
    try:
        axes = None if mesh is None else parse_mesh(mesh, framework=framework)
    except ValueError as exc:
        err.print(f"--mesh {mesh!r}: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    settings = settings_for(problems_dir=problems_dir)
    try:
        target = scaffold(settings.problems_dir, slug, framework, axes, budget=budget)
    except FileExistsError:
        err.print(f"{settings.problems_dir / slug} exists already")
        raise typer.Exit(EXIT_USAGE) from None
    console.print(
        f"created {target}: edit problem.toml, statement.md, starter.py, reference.py and wrong/ "
        f"(replace every TODO), then run `remat-judge problems validate {slug}`. It stays unpublished "
        f"(admins only) until `remat-judge problems publish {slug}`.",
        soft_wrap=True,
    )
