"""Validating a problem package through the real sandbox: first the reference checks itself
(`graders.reference.build`: it runs, in time and memory, deterministically, with gradients that are the
derivatives of its function); then the reference and every `right/` submission must be ACCEPTED,
and every `wrong/` submission must get the verdict its first line promises."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from graders.checks.comparison import is_bookkeeping
from graders.checks.residuals import signature
from graders.config import JudgeConfig
from graders.pipeline import check_reference, grade
from graders.problems.problem import Problem
from graders.verdict import Verdict, VerdictReport


@dataclass
class ValidationRow:
    """One graded file of a package.

    Attributes:
        file: path relative to the package ("reference.py", "wrong/no_checkpoint.py").
        expected, got: verdicts.
        note: what the judge said when the verdict differs, or why a WRONG_POLICY submission
            cannot be told apart from the reference; "" when the row is fine.
        seconds: grading time.
        residual_bytes, bwd_peak_bytes: what the file saves and its backward peak (the case the
            residual report shows), in bytes.
        recompute_flops: FLOPs its backward pass spends beyond the same function without any
            checkpoint (the forward work it recomputes), same case.
    """

    file: str
    expected: Verdict
    got: Verdict | None
    note: str = ""
    seconds: float = 0.0
    residual_bytes: int | None = None
    bwd_peak_bytes: int | None = None
    recompute_flops: int | None = None

    @property
    def ok(self) -> bool:
        return self.got == self.expected and not self.note


@dataclass
class ValidationReport:
    """The result of validating one package."""

    slug: str
    version: str
    rows: list[ValidationRow] = field(default_factory=list)
    error: str = ""
    reference_failures: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.error and not self.reference_failures and bool(self.rows) and all(r.ok for r in self.rows)

    def reference_lines(self) -> list[str]:
        """One line per failed self-check of the reference: `reference.py: <check>: <message>`."""
        return [f"reference.py: {check}: {message}" for check, message in self.reference_failures]


SEPARATING_BYTES = 1 << 20  # a case "separates policies" when a wrong one costs at least this much


def size_warnings(reference: VerdictReport) -> list[str]:
    """A warning when no case is large enough to separate policies: in the case where the
    reference saves the most, its residuals differ from the same function without any checkpoint
    by less than `SEPARATING_BYTES` (1 MiB; per device on a mesh, both counts being per device).
    Every wrong policy is still judged by value, but a student sees a mistake that costs a few
    bytes, and `at_most` bounds and the charts say little. None for a budget problem: its budget,
    chosen from `problems frontier`, decides what fits, not a comparison with the reference."""
    report = reference.residuals
    if report is None or report.no_checkpoint_bytes is None or report.budget_bytes is not None:
        return []
    gap = abs(report.no_checkpoint_bytes - report.expected_bytes)
    if gap >= SEPARATING_BYTES:
        return []
    per = " per device" if any(f.device_shape is not None for f in report.expected) else ""
    return [
        f"no case is large enough to separate policies: in case {report.case!r} the reference saves "
        f"{report.expected_bytes:,} bytes{per} and the same function without any checkpoint "
        f"{report.no_checkpoint_bytes:,} "
        f"(a difference of {gap:,}); add a case where they differ by at least {SEPARATING_BYTES:,} bytes (1 MiB), "
        f"so a wrong policy costs real memory"
    ]


def _indistinguishable(problem: Problem, report: VerdictReport, reference: VerdictReport) -> str:
    """A note when a submission meant to fail on its policy saves what the reference saves."""
    mine, theirs = report.residuals, reference.residuals
    if mine is None or theirs is None:
        return ""
    rule = problem.spec.memory
    peak_ok = (mine.submitted_bwd_peak_bytes or 0) <= (theirs.submitted_bwd_peak_bytes or 0) + rule.slack_bytes
    if rule.rule == "exact":
        # bookkeeping (loop counters, branch indices) is left out, as in the residuals check
        kept, ref_kept = ([f for f in side.submitted if not is_bookkeeping(f)] for side in (mine, theirs))
        same = signature(kept) == signature(ref_kept) and (peak_ok or not rule.bounds_peak)
    else:
        same = (
            mine.submitted_bytes - mine.submitted_host_bytes
            <= theirs.submitted_bytes - theirs.submitted_host_bytes + rule.slack_bytes
            and peak_ok
        )
    if same and rule.rule == "exact" and rule.match == "values":
        return (
            "this submission saves the reference's residuals as values too: no residual-based judge "
            "can tell it apart; choose another wrong submission"
        )
    if same:
        return (
            "the residual signature cannot tell this submission apart from the reference: give the "
            "values distinct shapes, or choose another wrong submission"
        )
    return ""


SCORE_LINE = re.compile(r"^#\s*score:\s*(below 1|[01](?:\.\d+)?)\s*$")
SCORE_TOLERANCE = 0.005


def score_note(source: str, score: float | None) -> str:
    """What is wrong with a file's score against its `# score:` line (among its first 5 lines: a
    number, met within `SCORE_TOLERANCE`, or "below 1"), or "" (also without such a line): a
    budget problem's right/ files say what score they must get."""
    for line in source.splitlines()[:5]:
        found = SCORE_LINE.match(line.strip())
        if not found:
            continue
        want, got = found.group(1), score or 0.0
        if want == "below 1":
            return "" if got < 1.0 - SCORE_TOLERANCE else f"scored {got:.4f}, expected below 1"
        return "" if abs(got - float(want)) <= SCORE_TOLERANCE else f"scored {got:.4f}, expected {float(want):.4f}"
    return ""


def _grade_file(
    problem: Problem, config: JudgeConfig, path: Path, expected: Verdict
) -> tuple[ValidationRow, VerdictReport]:
    """Grades the file at `path` of `problem` through the real jail: its row (seconds, sizes, and
    the first failed check's message when the verdict is not `expected`) and its report."""
    t0 = time.monotonic()
    source = path.read_text(encoding="utf-8")
    report = grade(source, problem, config)
    residuals = report.residuals
    row = ValidationRow(
        file=str(path.relative_to(problem.root)),
        expected=expected,
        got=report.verdict,
        seconds=time.monotonic() - t0,
        residual_bytes=residuals.submitted_bytes if residuals else None,
        bwd_peak_bytes=residuals.submitted_bwd_peak_bytes if residuals else None,
        recompute_flops=residuals.submitted_recompute_flops if residuals else None,
    )
    if report.verdict != expected:
        failed = [c for c in report.checks if not c.passed]
        row.note = (
            (failed[0].message.splitlines()[0][:300] if failed else "") if report.verdict != Verdict.ACCEPTED else ""
        )
    elif report.verdict == Verdict.ACCEPTED:
        row.note = score_note(source, report.score)
    return row, report


def validate_problem(
    problem: Problem, config: JudgeConfig, *, jobs: int = 2, on_row: Callable[[ValidationRow], None] | None = None
) -> ValidationReport:
    """Grades the reference and every `right/` and `wrong/` file of `problem` through the real jail.

    Args:
        problem: a loaded package.
        config: judge configuration (its cache and seed are used).
        jobs: files graded at once.
        on_row: called after each file is graded (for progress display).

    Returns:
        The report; `ok` is False when the reference fails a self-check (then no file is graded:
        `reference_failures`), on any mismatch, a reference or right/ file that is not ACCEPTED,
        or a WRONG_POLICY submission the judge cannot tell apart from the reference.
    """
    result = ValidationReport(slug=problem.slug, version=problem.version)
    try:
        variants = problem.right_submissions() + problem.wrong_submissions()
    except Exception as exc:  # noqa: BLE001 - a malformed expect line
        result.error = str(exc)
        return result
    failed = check_reference(problem, config)
    if failed is not None:
        result.reference_failures = failed.failures
        return result
    ref_row, ref_report = _grade_file(problem, config, problem.reference_path, Verdict.ACCEPTED)
    result.rows.append(ref_row)
    result.warnings += size_warnings(ref_report)
    if on_row:
        on_row(ref_row)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(_grade_file, problem, config, path, Verdict(expected)) for path, expected in variants]
        for future in futures:
            row, report = future.result()
            if row.expected == Verdict.WRONG_POLICY and row.got == Verdict.ACCEPTED and ref_row.ok:
                row.note = _indistinguishable(problem, report, ref_report) or row.note
            result.rows.append(row)
            if on_row:
                on_row(row)
    return result
