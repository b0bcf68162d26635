"""`remat-judge grade FILE --problem SLUG`: a file graded through the same jail and verifier as the
server, the report printed as a table (or JSON), exit 0 when ACCEPTED."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from graders.checks.residuals import format_residuals
from graders.problems.problem import ProblemRepository
from graders.problems.spec import ProblemError
from graders.verdict import VERDICT_EXPLANATIONS, Verdict, VerdictReport
from graders.verifier.xla_memory import describe as describe_xla
from server.cli.common import EXIT_ACCEPTED, EXIT_REJECTED, EXIT_USAGE, console, err, quietly, settings_for
from server.web.formatting import collectives


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
        if r.expected_bwd_peak_bytes is not None and not r.expected_xla_memory:  # on a mesh: XLA's line below
            console.print(
                f"backward pass peak live bytes: yours {r.submitted_bwd_peak_bytes:,}, "
                f"reference {r.expected_bwd_peak_bytes:,}"
            )
        if r.expected_recompute_flops is not None and r.submitted_recompute_flops is not None:
            console.print(
                f"backward pass recompute FLOPs: yours {r.submitted_recompute_flops:,}, "
                f"reference {r.expected_recompute_flops:,}"
            )
        if r.expected_bwd_received_bytes is not None and r.submitted_bwd_received_bytes is not None:
            console.print(
                f"backward pass communication, bytes received per device: yours "
                f"{r.submitted_bwd_received_bytes:,} ({collectives(r.submitted_bwd_collectives)}), reference "
                f"{r.expected_bwd_received_bytes:,} ({collectives(r.expected_bwd_collectives)})"
            )
        for who, side in (("yours", r.submitted_xla_memory), ("reference", r.expected_xla_memory)):
            if describe_xla(side):
                console.print(f"XLA's memory_analysis per device, {who}: {describe_xla(side)}", markup=False)
    for name in ("stdout", "stderr"):
        text = getattr(report, name)
        if text.strip():
            console.print(f"[bold]{name}[/]")
            console.print(text.rstrip(), markup=False, highlight=False)
    console.print(f"timing (ms): {report.timing_ms}")


def grade_file(
    file: Annotated[Path, typer.Argument(help="the submission's .py file")],
    problem: Annotated[str, typer.Option("--problem", "-p", help="problem slug")],
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict JSON")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
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
        # one submission, then the process exits: no child is worth starting ahead
        report = grade(source, loaded, replace(settings.judge_config(), ready_children=0))
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        _print_report(report)
    raise typer.Exit(EXIT_ACCEPTED if report.verdict == Verdict.ACCEPTED else EXIT_REJECTED)
