"""The `remat-judge` command line (Typer): serve, grade a file, list problems."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from graders.checks.residuals import format_residuals
from graders.problem import Problem, ProblemError, ProblemRepository
from graders.verdict import VERDICT_EXPLANATIONS, Verdict, VerdictReport
from server.console import make_console
from server.settings import Settings

if TYPE_CHECKING:
    from server.db import UserStore

app = typer.Typer(
    help="remat-judge: an online judge for JAX gradient-checkpointing exercises.",
    no_args_is_help=True,
    add_completion=False,
)
problems_app = typer.Typer(help="Work with problem packages.", no_args_is_help=True)
app.add_typer(problems_app, name="problems")
users_app = typer.Typer(help="Accounts of the web judge.", no_args_is_help=True)
app.add_typer(users_app, name="users")
from server.cli_db import db_app  # noqa: E402 - after the app it is added to

app.add_typer(db_app, name="db")
clients_app = typer.Typer(
    help="API clients (learning platforms, course scripts): keys, scopes, callbacks.", no_args_is_help=True
)
app.add_typer(clients_app, name="clients")
from server.lti.cli import lti_app  # noqa: E402 - LTI 1.3 platforms (issue 12)

app.add_typer(lti_app, name="lti")
from server.courses import cli as courses_cli  # noqa: E402 - courses and regrades (issue 12)

app.add_typer(courses_cli.courses_app, name="courses")
from server.web import account_cli  # noqa: E402 - password resets (issue 13)

users_app.command("reset-password")(account_cli.reset_password)
problems_app.command("regrade")(courses_cli.regrade)
problems_app.command("regrades")(courses_cli.regrades)

console = make_console()
err = make_console(stderr=True)

EXIT_ACCEPTED, EXIT_REJECTED, EXIT_USAGE = 0, 1, 2
# Idle keep-alive connections stay open this long (uvicorn's default is 5 s). Browsers keep used
# idle sockets far longer (Chromium: 300 s) and reuse them for a POST, which is not retried when
# the server closed the socket at that moment: a form post failed with ECONNRESET in CI.
KEEP_ALIVE_S = 75


def _quietly(call: Callable[[], object]) -> None:
    """Runs `call`, ignoring its failure (the grading that follows reports it)."""
    try:
        call()
    except Exception:  # noqa: BLE001
        pass


NOT_USED: Any = object()  # a folder the command does not use (not resolved, not printed)


def _settings(data_dir: Optional[Path] = NOT_USED, problems_dir: Optional[Path] = NOT_USED) -> Settings:
    """The settings, with each folder the command uses resolved (its flag, else the environment
    variable, else the working directory: `server.folders`) to an absolute path and printed as one
    dim line on stderr, so stdout (JSON, tables) stays clean. Pass None for a folder the command
    uses without a flag; leave it out for a folder the command does not use."""
    from server.folders import folder

    overrides: dict[str, Path] = {}
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


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    data_dir: Annotated[Optional[Path], typer.Option(help="database, cache and seed folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
    workers: Annotated[Optional[int], typer.Option(help="submissions graded at once (embedded mode)")] = None,
    processes: Annotated[
        int,
        typer.Option(help="HTTP server processes (distributed mode only: with REMAT_JUDGE_REDIS_URL)", min=1, max=64),
    ] = 1,
    metrics_port: Annotated[
        Optional[int],
        typer.Option(help="serve Prometheus metrics on this port (every server process's, and the queue depth)"),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="address of the metrics server")] = "127.0.0.1",
    forwarded_allow_ips: Annotated[
        Optional[str],
        typer.Option(
            help="comma-separated addresses (or *) of the reverse proxies whose X-Forwarded-For and "
            "X-Forwarded-Proto are trusted: the client's address (rate limits) and https (secure cookies) "
            "come from them; default FORWARDED_ALLOW_IPS, else 127.0.0.1"
        ),
    ] = None,
    ssl_certfile: Annotated[
        Optional[Path], typer.Option(help="serve HTTPS with this PEM certificate (chain), without a TLS proxy in front")
    ] = None,
    ssl_keyfile: Annotated[Optional[Path], typer.Option(help="the certificate's PEM private key")] = None,
) -> None:
    """Start the HTTP server (REST API under /api/v1, docs at /docs).

    Embedded mode (default): one process that also grades. With REMAT_JUDGE_REDIS_URL (and
    REMAT_JUDGE_DATABASE_URL): only stores and enqueues; `remat-judge worker` processes grade.
    Metrics: on --metrics-port, or at /metrics for a scraper holding REMAT_JUDGE_METRICS_TOKEN.
    """
    import os
    import shutil

    import uvicorn

    from server import logs

    settings = _settings(data_dir, problems_dir)
    if workers is not None:
        settings = settings.model_copy(update={"workers": workers})
    logs.configure(settings.log_format)
    if processes > 1 and not settings.scaled:
        err.print(
            "[red]--processes above 1 needs the distributed mode (REMAT_JUDGE_REDIS_URL): each embedded "
            "process would grade on its own queue[/]"
        )
        raise typer.Exit(EXIT_USAGE)
    if processes > 1:  # the server processes add up their metrics in one folder
        multiproc = settings.data_dir.resolve() / "metrics-multiproc"
        shutil.rmtree(multiproc, ignore_errors=True)
        multiproc.mkdir(parents=True)
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(multiproc))
    if settings.scaled:  # say a missing migration plainly, before the server starts (waiting for the database)
        from server.runtime import require_migrated
        from server.dbfaults import wait_for_database

        wait_for_database(settings.resolved_database_url)
        try:
            require_migrated(settings.resolved_database_url)
        except RuntimeError as exc:
            err.print(f"[red]{escape(str(exc))}[/]")
            raise typer.Exit(EXIT_USAGE) from None
    if (ssl_certfile is None) != (ssl_keyfile is None):
        err.print("[red]--ssl-certfile and --ssl-keyfile go together[/]")
        raise typer.Exit(EXIT_USAGE)
    tls = {"ssl_certfile": str(ssl_certfile), "ssl_keyfile": str(ssl_keyfile)} if ssl_certfile else {}
    if metrics_port is not None:
        _serve_metrics(settings, metrics_port, metrics_host)
    if processes == 1:
        from server.app import create_app

        uvicorn.run(
            create_app(settings),
            host=host,
            port=port,
            log_level="info",
            log_config=None,
            timeout_keep_alive=KEEP_ALIVE_S,
            proxy_headers=True,
            forwarded_allow_ips=forwarded_allow_ips,
            **tls,
        )
        return
    # the server processes read their settings from the environment
    os.environ["REMAT_JUDGE_DATA_DIR"] = str(settings.data_dir.resolve())
    os.environ["REMAT_JUDGE_PROBLEMS_DIR"] = str(settings.problems_dir.resolve())
    uvicorn.run(
        "server.app:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=processes,
        timeout_keep_alive=KEEP_ALIVE_S,
        proxy_headers=True,
        forwarded_allow_ips=forwarded_allow_ips,
        log_level="info",
        log_config=None,
        **tls,
    )


def _serve_metrics(settings: Settings, port: int, host: str) -> None:
    """Starts the metrics server of `serve` (a thread of this process): every server process's
    metrics, and the queue depth read from the database at each scrape. Exits with a message when
    the port is taken."""
    from server import metrics
    from server.db import SubmissionStore, make_engine

    store = SubmissionStore(make_engine(settings.resolved_database_url))
    try:
        metrics.serve(port, host, queue_depth=store.queue_depth)
    except OSError as exc:
        err.print(f"[red]cannot serve metrics on {escape(host)}:{port}: {exc.strerror or exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    err.print(f"[dim]metrics: http://{escape(host)}:{port}/metrics[/]", highlight=False)


@app.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="submissions graded at once", min=1, max=64)] = 2,
    data_dir: Annotated[Optional[Path], typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder")] = None,
    metrics_port: Annotated[Optional[int], typer.Option(help="serve Prometheus metrics on this port")] = None,
    metrics_host: Annotated[str, typer.Option(help="address of the metrics server")] = "127.0.0.1",
) -> None:
    """Grade submissions from the Redis queue (distributed mode: REMAT_JUDGE_REDIS_URL and
    REMAT_JUDGE_DATABASE_URL). Stops gracefully on SIGTERM."""
    from server import logs
    from server import worker as worker_process

    settings = _settings(data_dir, problems_dir)
    logs.configure(settings.log_format)
    try:
        worker_process.run(settings, concurrency=concurrency, metrics_port=metrics_port, metrics_host=metrics_host)
    except (ValueError, RuntimeError) as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None


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
    threading.Thread(target=lambda: _quietly(prestart), daemon=True).start()
    settings = _settings(data_dir, problems_dir)
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

    settings = _settings(problems_dir=problems_dir)
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

    from server.courses.cli import _course
    from server.insight import insight, versions

    engine = _engine(data_dir)
    chosen_course = _course(engine, course) if course else None
    if version is None:
        known = versions(engine, slug)
        try:
            published = ProblemRepository(_settings(problems_dir=problems_dir).problems_dir).get(slug).version
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
    settings = _settings(problems_dir=problems_dir)
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


ROW_COLUMNS = ("file", "expected", "got", "", "seconds", "residual bytes", "bwd peak bytes", "recompute FLOPs", "note")


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
    settings = _settings(data_dir, problems_dir)
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

    settings = _settings(data_dir, problems_dir)
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

    settings = _settings(problems_dir=problems_dir)
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

    settings = _settings(data_dir, problems_dir)
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


def _engine(data_dir: Optional[Path]):  # type: ignore[no-untyped-def]
    """The deployment's database, migrated to the latest revision; exits with a message (not an
    empty new database) when there is none at that place."""
    from server import migrate
    from server.db import make_engine

    url = _settings(data_dir).resolved_database_url
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


def _user_store(data_dir: Optional[Path]) -> "UserStore":
    from server.db import UserStore

    return UserStore(_engine(data_dir))


@users_app.command("list")
def users_list(data_dir: Annotated[Optional[Path], typer.Option(help="database folder")] = None) -> None:
    """List accounts: email (an LTI account's sign-in email is lti-…@lti.invalid; its LMS email
    beside it), name, site role, created."""
    table = Table()
    for column in ("email", "LMS email", "name", "site role", "created (UTC)"):
        table.add_column(column, overflow="fold")
    for u in _user_store(data_dir).all():
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
    data_dir: Annotated[Optional[Path], typer.Option(help="database folder")] = None,
) -> None:
    """Set an account's site role: admin (manages problems, API clients, LMS platforms, accounts
    and every course) or user. Teaching one course is a course role instead: `courses enroll KEY
    EMAIL --role staff`, or the LMS's Instructor role at launch."""
    from server.db import SiteRole

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
    if not _user_store(data_dir).set_role(email, site_role):
        err.print(f"no account {escape(email)!r}; it is made by signing up on the web page")
        raise typer.Exit(EXIT_USAGE)
    console.print(f"{escape(email)} is now {'an' if site_role == SiteRole.ADMIN else 'a'} {site_role.value}")


@clients_app.command("create")
def clients_create(
    name: Annotated[str, typer.Argument(help="a name for the client (unique)")],
    problems: Annotated[
        Optional[str], typer.Option(help="comma-separated problem slugs it may submit to (default: all)")
    ] = None,
    callback_allow: Annotated[
        Optional[list[str]], typer.Option("--callback-allow", help="URL prefix its callbacks may go to (repeatable)")
    ] = None,
    data_dir: Annotated[Optional[Path], typer.Option(help="the server's data folder")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option(help="problem packages folder (checks --problems)")] = None,
) -> None:
    """Create an API client and print, once, as JSON: client_id, api_key, callback_secret.

    The key is stored hashed and cannot be shown again; revoke and recreate to replace it.
    """
    import json

    from server.callbacks import check_prefix
    from server.db import ClientStore

    import re

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
        known = set(ProblemRepository(_settings(problems_dir=problems_dir).problems_dir).slugs())
        unknown = [p for p in scope if p not in known]
        if unknown:
            err.print(f"[red]unknown problems: {', '.join(unknown)}[/]")
            raise typer.Exit(EXIT_USAGE)
    try:
        record, api_key = ClientStore(_engine(data_dir)).create(name, problems=scope, callback_allow=prefixes)
    except ValueError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    print(json.dumps({"client_id": record.name, "api_key": api_key, "callback_secret": record.callback_secret}))


@clients_app.command("list")
def clients_list(data_dir: Annotated[Optional[Path], typer.Option(help="the server's data folder")] = None) -> None:
    """List API clients: name, key prefix, problems, callback prefixes, created, revoked."""
    from server.db import ClientStore

    table = Table(show_header=True, header_style="bold")
    for column in ("name", "key", "problems", "callbacks to", "created", "revoked"):
        table.add_column(column, overflow="fold")
    for c in ClientStore(_engine(data_dir)).all():
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
    data_dir: Annotated[Optional[Path], typer.Option(help="the server's data folder")] = None,
) -> None:
    """Revoke a client's key (at once, for every server process sharing the database)."""
    from server.db import ClientStore

    if not ClientStore(_engine(data_dir)).revoke(name):
        err.print(f"[red]no active client named {name!r}[/]")
        raise typer.Exit(EXIT_USAGE)
    console.print(f"revoked {name}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
