"""`remat-judge problems ...`: list, insight, new, validate, publish, unpublish (and, from
`server.cli.courses`, regrade and regrades; `add` in `server.cli.packages`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from graders.problems.problem import Problem, ProblemRepository
from graders.problems.spec import ProblemError
from server.cli.common import EXIT_REJECTED, EXIT_USAGE, console, engine_for, err, settings_for
from server.settings import Settings

if TYPE_CHECKING:
    from server.problems.clusters import Insight

problems_app = typer.Typer(help="Work with problem packages.", no_args_is_help=True)


ROW_COLUMNS = ("file", "expected", "got", "", "seconds", "residual bytes", "bwd peak bytes", "recompute FLOPs", "note")


@problems_app.command("list")
def problems_list(problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None) -> None:
    """List the problems: slug, title, difficulty, tags, cases, version, published (what the server
    serves, from `ProblemRepository.serving`: a missing published snapshot is made here when the
    folder still is that version, and a problem the server refuses is listed as REFUSED)."""
    settings = settings_for(problems_dir=problems_dir)
    repo = ProblemRepository(settings.problems_dir)
    table = Table(title=f"problems in {settings.problems_dir}")
    for column in ("slug", "title", "difficulty", "tags", "cases", "version", "published"):
        table.add_column(column)
    notes: list[str] = []
    broken: list[str] = []
    for slug in repo.slugs():
        try:
            serving = repo.serving(slug)
        except KeyError:  # removed while listed
            continue
        if serving.refusal:
            shown = f"[red]REFUSED ({escape(serving.published_version or '')}: snapshot gone, folder changed)[/]"
            notes.append(f"[red]{escape(serving.describe())}[/]")
        elif not serving.published:
            shown = "[dim]no[/]"
        elif serving.changed:
            shown = f"[yellow]changed since publish ({escape(serving.published_version or '')})[/]"
            notes.append(f"[yellow]{escape(serving.describe())}[/]")
        else:
            shown = "yes"
        try:
            p = repo.working(slug)
        except ProblemError as exc:
            broken.append(f"{slug}: {exc}")
            table.add_row(escape(slug), "[red]invalid[/]", "", "", "", serving.working_version, shown)
            continue
        table.add_row(
            escape(p.slug),
            escape(p.spec.title),
            p.spec.difficulty,
            escape(", ".join(p.spec.tags)),
            escape(", ".join(c.name for c in p.spec.cases)),
            p.version,
            shown,
        )
    console.print(table)
    for line in notes:
        err.print(line, soft_wrap=True)
    for line in broken:
        err.print(f"[red]invalid[/] {escape(line)}")


@problems_app.command("insight")
def problems_insight(
    slug: Annotated[str, typer.Argument(help="the problem's slug")],
    course: Annotated[str | None, typer.Option(help="only this course's students")] = None,
    version: Annotated[
        str | None, typer.Option(help="the problem version (default: the published one, else the one graded last)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="the server's data folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Which policies the class made: graded submissions grouped by policy fingerprint (students,
    submissions, verdict, what the policy does, examples, how many later got ACCEPTED), and
    submissions of different students whose exported programs are identical up to names."""
    import json as json_module

    from server.cli.courses import find_course
    from server.problems.clusters import insight, versions

    engine = engine_for(data_dir)
    chosen_course = find_course(engine, course) if course else None
    if version is None:
        known = versions(engine, slug)
        try:
            published = ProblemRepository(settings_for(problems_dir=problems_dir).problems_dir).get(slug).version
        except (KeyError, ProblemError):
            published = None
        version = published if published in known else next(iter(known), None)
    found = insight(engine, slug, version=version, course=chosen_course)
    if as_json:
        print(json_module.dumps(found.as_json()))
        return
    where = f" in {escape(chosen_course.key)}" if chosen_course else ""
    if not found.clusters:
        console.print(f"no graded submissions of {escape(slug)}{where}" + (f" (version {version})" if version else ""))
        return
    _print_insight(found, slug, where)


def _print_insight(found: Insight, slug: str, where: str) -> None:
    """Prints `problems insight`'s tables: the clusters, then the identical programs, then how
    many submissions have no program digest."""
    table = Table(title=f"{escape(slug)} version {found.version}{where}: {found.graded} graded submissions")
    for column in (
        "students",
        "submissions",
        "verdict",
        "later ACCEPTED",
        "what the policy does",
        "example",
        "fingerprint",
    ):
        table.add_column(column, overflow="fold")
    for c in found.clusters:
        table.add_row(
            str(c.students),
            str(c.submissions),
            c.verdict,
            "-" if c.verdict == "ACCEPTED" else f"{c.later_accepted} of {c.students}",
            escape(c.summary),
            c.example,
            c.fingerprint,
        )
    console.print(table)
    if found.identical_groups:
        same = Table(title="identical programs (up to names) from different students: a prompt to look, not a verdict")
        same.add_column("students")
        same.add_column("submissions", overflow="fold")
        for g in found.identical_groups:
            same.add_row(str(g.students), ", ".join(g.submissions))
        console.print(same)
    if found.without_programs:
        err.print(
            f"[dim]{found.without_programs} submissions were graded before program digests were kept; "
            f"a regrade fills them in[/]"
        )


@problems_app.command("tree-spec")
def problems_tree_spec(
    slug: Annotated[str, typer.Argument(help="the problem whose reference.py defines init(**dims)")],
    case: Annotated[
        str | None, typer.Option(help="the case whose dims are used (default: one with distinct dims)")
    ] = None,
    name: Annotated[str, typer.Option(help="the argument's name")] = "params",
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Print the [[args]] table of a pytree argument for problem.toml: the shapes of the parameters
    `init(**dims)` in reference.py makes (jax.eval_shape), each size written by its dimension's
    name. Runs the reference here: use it on your own package."""
    import subprocess
    import sys

    settings = settings_for(problems_dir=problems_dir)
    folder = settings.problems_dir / slug
    if not (folder / "problem.toml").is_file() or not (folder / "reference.py").is_file():
        err.print(f"no problem.toml and reference.py in {folder}")
        raise typer.Exit(EXIT_USAGE)
    # in its own process: it imports the reference and JAX, which this process never does
    command = [sys.executable, "-m", "graders.problems.tree_spec", str(folder), "--name", name]
    done = subprocess.run(command + (["--case", case] if case else []), capture_output=True, text=True)
    if done.returncode != 0:
        err.print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "tree-spec failed", markup=False)
        raise typer.Exit(1)
    print(done.stdout, end="")


def rows_table(title: str, rows: list[tuple]) -> Table:
    """The expected-against-got table of `problems validate` and `problems add`; each row is
    (file, expected, got, ok, then the remaining columns as text)."""
    table = Table(title=title, title_justify="left")
    for column in ROW_COLUMNS:
        table.add_column(column, overflow="fold")
    for file, expected, got, ok, *rest in rows:
        rest = list(rest) + [""] * (len(ROW_COLUMNS) - 4 - len(rest))
        table.add_row(file, expected, got, "[green]ok[/]" if ok else "[red]MISMATCH[/]", *rest)
    return table


def validate_packages(problems: list[Problem], settings: Settings, jobs: int) -> bool:
    """Validates packages with a progress bar and one table per package; True when all pass."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from graders.problems.validate import validate_problem

    config = settings.judge_config()
    total = sum(
        1 + len(list((p.root / "wrong").glob("*.py"))) + len(list((p.root / "right").glob("*.py"))) for p in problems
    )
    all_ok = True
    reports = []
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    ) as progress:
        task = progress.add_task("validating", total=total)
        for problem in problems:
            progress.update(task, description=f"validating {problem.slug}")
            report = validate_problem(problem, config, jobs=jobs, on_row=lambda _: progress.advance(task))
            reports.append(report)
    for report in reports:
        if report.reference_failures:
            console.print(
                f"[bold]{escape(report.slug)}[/] (version {report.version}): the reference failed its "
                f"self-checks; no file was graded"
            )
            for line in report.reference_lines():
                print(line)  # plain text, one line each, for the author and for scripts
            all_ok = False
            continue
        console.print(
            rows_table(
                f"{report.slug} (version {report.version})",
                [
                    (
                        row.file,
                        row.expected.value,
                        row.got.value if row.got else "-",
                        row.ok,
                        f"{row.seconds:.1f}",
                        f"{row.residual_bytes:,}" if row.residual_bytes is not None else "",
                        f"{row.bwd_peak_bytes:,}" if row.bwd_peak_bytes is not None else "",
                        f"{row.recompute_flops:,}" if row.recompute_flops is not None else "",
                        row.note,
                    )
                    for row in report.rows
                ],
            )
        )
        if report.error:
            console.print(f"[red]{report.slug}: {escape(report.error)}[/]")
        for warning in report.warnings:
            console.print(f"[yellow]{report.slug}: warning: {escape(warning)}[/]")
        all_ok = all_ok and report.ok
    return all_ok


@problems_app.command("validate")
def problems_validate(
    slugs: Annotated[list[str] | None, typer.Argument(help="slugs (default: all)")] = None,
    jobs: Annotated[int, typer.Option(help="files graded at once")] = 2,
    data_dir: Annotated[Path | None, typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Load packages strictly (every static error of a package at once: missing and misplaced
    files, problem.toml, `# expect:` lines), grade each reference (must be ACCEPTED) and every
    wrong/ file (must get its verdict) through the real sandbox. Exits 1 on any mismatch or invalid
    package."""
    settings = settings_for(data_dir, problems_dir)
    repo = ProblemRepository(settings.problems_dir)
    wanted = slugs or repo.slugs()
    loaded, ok = [], True
    for slug in wanted:
        try:
            loaded.append(repo.checked(slug))
        except KeyError:
            err.print(f"[red]no problem {slug!r} in {settings.problems_dir}[/]")
            ok = False
        except ProblemError as exc:
            err.print(f"[red]invalid package {escape(slug)}:[/]\n{escape(str(exc))}", soft_wrap=True, highlight=False)
            ok = False
    if loaded:
        ok = validate_packages(loaded, settings, jobs) and ok
    raise typer.Exit(0 if ok else 1)


@problems_app.command("publish")
def problems_publish(
    slug: Annotated[str, typer.Argument(help="the problem's slug")],
    jobs: Annotated[int, typer.Option(help="files graded at once")] = 2,
    data_dir: Annotated[Path | None, typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Publish a problem: students, API clients and LMS deep linking see it from now on.

    Refuses (exit 1), saying why, while a TODO is left in problem.toml, statement.md, starter.py,
    reference.py or hints.md, or when the package does not pass `problems validate`. Copies the
    validated version into an immutable snapshot (what students get from now on, whatever happens
    to the folder) and records it in the package's `.published` file.
    """
    from graders.problems.publication import TodosLeft, VersionChanged, publish, todos

    settings = settings_for(data_dir, problems_dir)
    try:
        problem = ProblemRepository(settings.problems_dir).checked(slug)
    except KeyError:
        err.print(f"[red]no problem {escape(repr(slug))} in {escape(str(settings.problems_dir))}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    except ProblemError as exc:
        err.print(
            f"[red]not published: the package does not load:[/]\n{escape(str(exc))}", soft_wrap=True, highlight=False
        )
        raise typer.Exit(EXIT_REJECTED) from None
    left = todos(problem.root)
    if left:
        err.print(
            f"[red]not published: {len(left)} TODO{'s' if len(left) > 1 else ''} left in {slug} "
            f"(write each part, then publish again):[/]"
        )
        for line in left:
            err.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
        raise typer.Exit(EXIT_REJECTED)
    if not validate_packages([problem], settings, jobs):
        err.print(
            f"[red]not published: {slug} does not validate (the table above says which file got which verdict)[/]"
        )
        raise typer.Exit(EXIT_REJECTED)
    try:  # as an upload with publish and the upload page's Publish button do
        publish(problem.root, settings.problems_dir, problem.version)
    except TodosLeft as exc:  # written while it was validated
        err.print(f"[red]not published: {exc} in {slug} (write each part, then publish again)[/]")
        raise typer.Exit(EXIT_REJECTED) from None
    except VersionChanged:
        err.print(f"[red]not published: {slug} changed while it was validated; publish again[/]")
        raise typer.Exit(EXIT_REJECTED) from None
    except OSError as exc:
        err.print(f"[red]not published: {escape(str(exc))}[/]")
        raise typer.Exit(EXIT_REJECTED) from None
    console.print(f"published {slug} version {problem.version}: students get this version until the next publish")


@problems_app.command("unpublish")
def problems_unpublish(
    slug: Annotated[str, typer.Argument(help="the problem's slug")],
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Hide a problem from students, API clients and LMS deep linking (instructors still see and
    grade it; past submissions are kept). `problems publish` shows it again."""
    from graders.problems.publication import mark_unpublished

    settings = settings_for(problems_dir=problems_dir)
    if slug not in ProblemRepository(settings.problems_dir).slugs():
        err.print(f"[red]no problem {escape(repr(slug))} in {escape(str(settings.problems_dir))}[/]")
        raise typer.Exit(EXIT_USAGE)
    if mark_unpublished(settings.problems_dir / slug):
        console.print(f"unpublished {slug}: only instructors see it now")
    else:
        console.print(f"{slug} was not published")
