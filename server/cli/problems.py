"""`remat-judge grade` (a file against a problem, in the jail) and `remat-judge problems ...`: list,
insight, new, validate, publish, unpublish, add (locally or to a server)."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from graders.checks.residuals import format_residuals
from graders.problem import Problem, ProblemError, ProblemRepository
from graders.verdict import VERDICT_EXPLANATIONS, Verdict, VerdictReport
from server.settings import Settings

from server.cli.common import EXIT_ACCEPTED, EXIT_REJECTED, EXIT_USAGE, console, engine_for, err, quietly, settings_for

app = typer.Typer()  # `grade`, added to the main app (server.cli)
problems_app = typer.Typer(help="Work with problem packages.", no_args_is_help=True)
ROW_COLUMNS = ("file", "expected", "got", "", "seconds", "residual bytes", "bwd peak bytes", "recompute FLOPs", "note")


def _headline(report: VerdictReport) -> str:
    """The verdict's one line, from the check that failed (the web panel's diagnosis)."""
    from server.web.panel import panel_context

    try:
        diagnosis = panel_context(report)["diagnosis"]
        return (
            f"{diagnosis.headline}."
            if diagnosis.headline and not diagnosis.headline.endswith(".")
            else diagnosis.headline
        )
    except Exception:  # noqa: BLE001 - a report the panel cannot read: the verdict's own words
        return VERDICT_EXPLANATIONS[report.verdict or Verdict.INTERNAL_ERROR]


def _print_report(report: VerdictReport) -> None:
    verdict = report.verdict or Verdict.INTERNAL_ERROR
    color = "green" if verdict == Verdict.ACCEPTED else "red"
    console.print(
        f"[bold {color}]{verdict.value}[/]  score {report.score:.2f}  ({report.problem}, "
        f"version {report.problem_version})"
    )
    console.print(_headline(report), markup=False, highlight=False)
    table = Table(show_header=True, header_style="bold")
    table.add_column("check")
    table.add_column("")
    table.add_column("message", overflow="fold")
    for check in report.checks:
        mark = "[green]ok[/]" if check.passed else "[red]FAIL[/]"
        # a check's message can quote the submission (an exception's text): never Rich markup
        table.add_row(Text(check.name), mark if check.judged else "[dim]info[/]", Text(check.message))
    console.print(table)
    if report.residuals is not None:
        r = report.residuals
        console.print(
            format_residuals(r.expected, title=f"the required policy saves ({r.case})", unmatched="not saved by yours"),
            markup=False,
            highlight=False,
        )
        console.print(format_residuals(r.submitted, title=f"yours saves ({r.case})"), markup=False, highlight=False)
        if r.expected_bwd_peak_bytes is not None:
            console.print(
                f"backward pass peak live bytes: yours {r.submitted_bwd_peak_bytes:,}, "
                f"reference {r.expected_bwd_peak_bytes:,}"
            )
        if r.expected_recompute_flops is not None and r.submitted_recompute_flops is not None:
            console.print(
                f"backward pass recompute FLOPs: yours {r.submitted_recompute_flops:,}, "
                f"reference {r.expected_recompute_flops:,}"
            )
    for name in ("stdout", "stderr"):
        text = getattr(report, name)
        if text.strip():
            console.print(f"[bold]{name}[/]")
            console.print(text.rstrip(), markup=False, highlight=False)
    console.print(f"timing (ms): {report.timing_ms}")


@app.command("grade")
def grade_file(
    file: Annotated[Path, typer.Argument(help="the submission's .py file")],
    problem: Annotated[str, typer.Option("--problem", "-p", help="problem slug")],
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict JSON")] = False,
    data_dir: Annotated[Optional[Path], typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
) -> None:
    """Grade FILE against a problem through the same sandbox and verifier as the server.

    Exits 0 only for ACCEPTED, 1 for any other verdict, 2 for usage errors.
    """
    import threading

    from graders.pipeline import grade, prestart

    # both templates import JAX while the file and the problem load
    threading.Thread(target=lambda: quietly(prestart), daemon=True).start()
    settings = settings_for(data_dir, problems_dir)
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        err.print(f"cannot read {file}: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    try:
        loaded = ProblemRepository(settings.problems_dir).get(problem)
    except KeyError:
        err.print(f"no problem {problem!r} in {settings.problems_dir}; `remat-judge problems list` lists them")
        raise typer.Exit(EXIT_USAGE) from None
    except ProblemError as exc:
        err.print(f"problem {problem!r} is invalid:\n{exc}")
        raise typer.Exit(EXIT_USAGE) from None
    with err.status(f"grading {file.name} against {problem}...") if not as_json else nullcontext():
        report = grade(source, loaded, settings.judge_config())
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        _print_report(report)
    raise typer.Exit(EXIT_ACCEPTED if report.verdict == Verdict.ACCEPTED else EXIT_REJECTED)


@problems_app.command("list")
def problems_list(problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None) -> None:
    """List the problems: slug, title, difficulty, tags, cases, version, published."""
    from graders.publication import publication

    settings = settings_for(problems_dir=problems_dir)
    repo = ProblemRepository(settings.problems_dir)
    table = Table(title=f"problems in {settings.problems_dir}")
    for column in ("slug", "title", "difficulty", "tags", "cases", "version", "published"):
        table.add_column(column)
    broken, changed = [], []
    for slug in repo.slugs():
        try:
            p = repo.working(slug)
        except ProblemError as exc:
            broken.append(f"{slug}: {exc}")
            continue
        state = publication(p.root, p.version)
        if state.changed:
            changed.append(p.slug)
            shown = f"[yellow]changed since publish ({escape(state.published_version or '')})[/]"
        else:
            shown = "yes" if state.published else "[dim]no[/]"
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
    for slug in changed:
        err.print(
            f"[yellow]{slug} changed since it was published: students still get the published version; "
            f"`remat-judge problems publish {slug}` validates and publishes this one[/]"
        )
    for line in broken:
        err.print(f"[red]invalid[/] {escape(line)}")


@problems_app.command("insight")
def problems_insight(
    slug: Annotated[str, typer.Argument(help="the problem's slug")],
    course: Annotated[Optional[str], typer.Option(help="only this course's students")] = None,
    version: Annotated[
        Optional[str], typer.Option(help="the problem version (default: the published one, else the one graded last)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    data_dir: Annotated[Optional[Path], typer.Option(help="the server's data folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
) -> None:
    """Which policies the class made: graded submissions grouped by policy fingerprint (students,
    submissions, verdict, what the policy does, examples, how many later got ACCEPTED), and
    submissions of different students whose exported programs are identical up to names."""
    import json as json_module

    from server.cli.courses import _course
    from server.insight import insight, versions

    engine = engine_for(data_dir)
    chosen_course = _course(engine, course) if course else None
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


@problems_app.command("new")
def problems_new(
    slug: Annotated[str, typer.Argument(help="the new problem's slug (folder name)")],
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
) -> None:
    """Scaffold a problem package with every file, each field commented."""
    import re

    from graders.problem import SLUG_RE
    from graders.scaffold import scaffold

    if not re.match(SLUG_RE, slug):
        err.print(f"{slug!r} is not a valid slug: lowercase letters, digits and underscores, starting with a letter")
        raise typer.Exit(EXIT_USAGE)
    settings = settings_for(problems_dir=problems_dir)
    try:
        target = scaffold(settings.problems_dir, slug)
    except FileExistsError:
        err.print(f"{settings.problems_dir / slug} exists already")
        raise typer.Exit(EXIT_USAGE) from None
    console.print(
        f"created {target}: edit problem.toml, statement.md, starter.py, reference.py and wrong/ "
        f"(replace every TODO), then run `remat-judge problems validate {slug}`. It stays unpublished "
        f"(admins only) until `remat-judge problems publish {slug}`.",
        soft_wrap=True,
    )


def _rows_table(title: str, rows: list[tuple]) -> Table:
    """The expected-against-got table of `problems validate` and `problems add`; each row is
    (file, expected, got, ok, then the remaining columns as text)."""
    table = Table(title=title, title_justify="left")
    for column in ROW_COLUMNS:
        table.add_column(column, overflow="fold")
    for file, expected, got, ok, *rest in rows:
        rest = list(rest) + [""] * (len(ROW_COLUMNS) - 4 - len(rest))
        table.add_row(file, expected, got, "[green]ok[/]" if ok else "[red]MISMATCH[/]", *rest)
    return table


def _validate_packages(problems: list[Problem], settings: Settings, jobs: int) -> bool:
    """Validates packages with a progress bar and one table per package; True when all pass."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from graders.validate import validate_problem

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
            _rows_table(
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
    slugs: Annotated[Optional[list[str]], typer.Argument(help="slugs (default: all)")] = None,
    jobs: Annotated[int, typer.Option(help="files graded at once")] = 2,
    data_dir: Annotated[Optional[Path], typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
) -> None:
    """Load packages strictly, grade each reference (must be ACCEPTED) and every wrong/ file (must get
    its verdict) through the real sandbox. Exits 1 on any mismatch or invalid package."""
    settings = settings_for(data_dir, problems_dir)
    repo = ProblemRepository(settings.problems_dir)
    wanted = slugs or repo.slugs()
    loaded, ok = [], True
    for slug in wanted:
        try:
            loaded.append(repo.working(slug))
        except KeyError:
            err.print(f"[red]no problem {slug!r} in {settings.problems_dir}[/]")
            ok = False
        except ProblemError as exc:
            err.print(f"[red]invalid package {slug}:[/]\n{exc}")
            ok = False
    if loaded:
        ok = _validate_packages(loaded, settings, jobs) and ok
    raise typer.Exit(0 if ok else 1)


@problems_app.command("publish")
def problems_publish(
    slug: Annotated[str, typer.Argument(help="the problem's slug")],
    jobs: Annotated[int, typer.Option(help="files graded at once")] = 2,
    data_dir: Annotated[Optional[Path], typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
) -> None:
    """Publish a problem: students, API clients and LMS deep linking see it from now on.

    Refuses (exit 1), saying why, while a TODO is left in problem.toml, statement.md, starter.py,
    reference.py or hints.md, or when the package does not pass `problems validate`. Copies the
    validated version into an immutable snapshot (what students get from now on, whatever happens
    to the folder) and records it in the package's `.published` file.
    """
    from graders.problem import load_problem
    from graders.publication import mark_published, take_snapshot, todos

    settings = settings_for(data_dir, problems_dir)
    try:
        problem = ProblemRepository(settings.problems_dir).working(slug)
    except KeyError:
        err.print(f"[red]no problem {escape(repr(slug))} in {escape(str(settings.problems_dir))}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    except ProblemError as exc:
        err.print(f"[red]not published: the package does not load:[/]\n{escape(str(exc))}")
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
    if not _validate_packages([problem], settings, jobs):
        err.print(
            f"[red]not published: {slug} does not validate (the table above says which file got which verdict)[/]"
        )
        raise typer.Exit(EXIT_REJECTED)
    try:
        now = load_problem(problem.root).version
    except ProblemError:
        now = None
    if now != problem.version:
        err.print(f"[red]not published: {slug} changed while it was validated; publish again[/]")
        raise typer.Exit(EXIT_REJECTED)
    try:
        take_snapshot(problem.root, settings.problems_dir, problem.version)
    except (OSError, ValueError) as exc:
        err.print(f"[red]not published: {escape(str(exc))}[/]")
        raise typer.Exit(EXIT_REJECTED) from None
    mark_published(problem.root, problem.version)
    console.print(f"published {slug} version {problem.version}: students get this version until the next publish")


@problems_app.command("unpublish")
def problems_unpublish(
    slug: Annotated[str, typer.Argument(help="the problem's slug")],
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
) -> None:
    """Hide a problem from students, API clients and LMS deep linking (instructors still see and
    grade it; past submissions are kept). `problems publish` shows it again."""
    from graders.publication import mark_unpublished

    settings = settings_for(problems_dir=problems_dir)
    if slug not in ProblemRepository(settings.problems_dir).slugs():
        err.print(f"[red]no problem {escape(repr(slug))} in {escape(str(settings.problems_dir))}[/]")
        raise typer.Exit(EXIT_USAGE)
    if mark_unpublished(settings.problems_dir / slug):
        console.print(f"unpublished {slug}: only instructors see it now")
    else:
        console.print(f"{slug} was not published")


@problems_app.command("add")
def problems_add(
    path: Annotated[Path, typer.Argument(help="the package folder")],
    server: Annotated[Optional[str], typer.Option(help="upload to this server instead (URL)")] = None,
    token: Annotated[
        Optional[str],
        typer.Option(
            envvar="REMAT_JUDGE_INSTRUCTOR_TOKEN",
            help="the server's admin token (REMAT_JUDGE_INSTRUCTOR_TOKEN) for --server",
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(help="files graded at once")] = 2,
    data_dir: Annotated[Optional[Path], typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
    publish: Annotated[bool, typer.Option("--publish", help="publish it too (refused while a TODO is left)")] = False,
) -> None:
    """Validate a package and install it into the problems folder, or with --server upload it to a
    running judge (which validates it again before installing it).

    A new problem arrives unpublished (admins only) unless --publish; one that replaces a
    published problem stays published, flagged by `problems list` until it is published again.
    """
    from graders.publication import publication, todos
    from server.packages import PackageError, install, pack, staged_package

    if not (path / "problem.toml").is_file():
        err.print(f"{path} is not a problem package (no problem.toml)")
        raise typer.Exit(EXIT_USAGE)
    if publish and (left := todos(path)):
        err.print(f"[red]not added: --publish, but {len(left)} TODO{'s' if len(left) > 1 else ''} left:[/]")
        for line in left:
            err.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
        raise typer.Exit(EXIT_REJECTED)
    if server is not None:
        if not token:
            err.print("--server needs --token (or REMAT_JUDGE_INSTRUCTOR_TOKEN)")
            raise typer.Exit(EXIT_USAGE)
        _upload(path, server.rstrip("/"), token, publish=publish)

    settings = settings_for(data_dir, problems_dir)
    try:
        with staged_package(pack(path), settings.problems_dir) as problem:
            if not _validate_packages([problem], settings, jobs):
                err.print("[red]not installed: the package does not validate[/]")
                raise typer.Exit(EXIT_REJECTED)
            target = install(
                problem.root,
                settings.problems_dir,
                settings.data_dir / "problem-history",
                publish_version=problem.version if publish else None,
            )
    except (PackageError, ProblemError) as exc:
        err.print(f"[red]invalid package:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    now = publication(target, problem.version)
    state = (
        "published"
        if now.published and not now.changed
        else f"still published, changed since publish: run `remat-judge problems publish {problem.slug}`"
        if now.published
        else f"unpublished (admins only) until `remat-judge problems publish {problem.slug}`"
    )
    console.print(f"installed {problem.slug} version {problem.version} at {target}: {state}", soft_wrap=True)


def _upload(path: Path, server: str, token: str, *, publish: bool) -> None:
    """Uploads the package at `path` to `server` and follows its validation (polling the upload's
    status every second, with a progress line on stderr) to the end; exits 0 when it was installed,
    1 otherwise, printing the validation table, the reference's failed self-checks and warnings."""
    import time

    import httpx

    from server.packages import pack

    auth = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=server, timeout=60, headers=auth) as client:
            response = client.post(
                "/api/v1/problems",
                content=pack(path),
                params={"publish": "true"} if publish else None,
                headers={"Content-Type": "application/gzip"},
            )
            body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
            if response.status_code != 202:
                err.print(
                    f"[red]refused ({response.status_code}):[/] {escape(str(body.get('detail', response.text[:500])))}"
                )
                raise typer.Exit(EXIT_REJECTED)
            with err.status("") as status:
                while body.get("state") == "validating":
                    progress = body.get("progress", {})
                    status.update(
                        f"{server} validates {body.get('slug')} through its sandbox: "
                        f"{progress.get('done', 0)} of {progress.get('total', '?')} files graded"
                    )
                    time.sleep(1.0)
                    body = client.get(body.get("status_url") or f"/api/v1/problems/uploads/{body['id']}").json()
    except httpx.HTTPError as exc:
        err.print(f"cannot reach {server}: {exc}")
        raise typer.Exit(EXIT_REJECTED) from None
    for failure in body.get("reference_failures", []):
        print(f"reference.py: {failure['check']}: {failure['message']}")
    if body.get("rows"):
        console.print(
            _rows_table(
                f"validated by {server}",
                [
                    (
                        r["file"],
                        r["expected"],
                        r["got"] or "-",
                        r["ok"],
                        f"{r['seconds']:.1f}",
                        "" if r["residual_bytes"] is None else f"{r['residual_bytes']:,}",
                        "" if r["bwd_peak_bytes"] is None else f"{r['bwd_peak_bytes']:,}",
                        "" if r.get("recompute_flops") is None else f"{r['recompute_flops']:,}",
                        r["note"],
                    )
                    for r in body["rows"]
                ],
            )
        )
    for warning in body.get("warnings", []):
        console.print(f"[yellow]warning: {escape(warning)}[/]")
    if body.get("state") == "done":
        console.print(
            f"installed {body['slug']} version {body['version']}"
            + (f" (replaces {body['previous_version']})" if body.get("previous_version") else "")
            + (", published" if body.get("published") else ", unpublished (admins only)")
        )
        raise typer.Exit(0)
    err.print(f"[red]not installed:[/] {escape(str(body.get('detail', '')))}")
    raise typer.Exit(EXIT_REJECTED)
