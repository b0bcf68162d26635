"""`remat-judge courses ...` and `remat-judge problems regrade`: courses, assignments and regrades.

Every command works on the deployment's database (`--data-dir`, or `REMAT_JUDGE_DATABASE_URL`)
and refuses to create one. Times are ISO 8601, UTC unless they carry an offset.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from server.cli.common import EXIT_USAGE, console, engine_for, err, settings_for
from server.store.accounts import UserStore
from server.store.course_store import CourseStore
from server.store.courses import Course, CourseError, GradeRule, LateRule, Policy
from server.store.lti_passback import LtiCourseGrades, PassbackStore

courses_app = typer.Typer(
    help="Courses: assignments with deadlines and late rules, enrollments, extensions, "
    "gradebooks (LTI courses are made by launches).",
    no_args_is_help=True,
)
DataDir = Annotated[Path | None, typer.Option(help="the server's data folder")]


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]{escape(message)}[/]")
    return typer.Exit(EXIT_USAGE)


def find_course(engine, key: str) -> Course:
    course = CourseStore(engine).get(key)
    if course is None:
        raise _fail(f"no course {key!r} (see `remat-judge courses list`)")
    return course


def _problems(problems_dir: Path | None):
    from graders.problems.problem import ProblemRepository

    return ProblemRepository(settings_for(problems_dir=problems_dir).problems_dir)


@courses_app.command("create")
def create(
    key: Annotated[str, typer.Argument(help="short name: lower-case letters, digits, - and _")],
    title: Annotated[str, typer.Option(help="the course's title")] = "",
    data_dir: DataDir = None,
) -> None:
    """Create a course."""
    try:
        course = CourseStore(engine_for(data_dir)).create(key, title or key)
    except CourseError as exc:
        raise _fail(str(exc)) from None
    console.print(f"created course {escape(course.key)} ({escape(course.title)})")


@courses_app.command("list")
def list_courses(data_dir: DataDir = None) -> None:
    """List courses: key, title, LMS context, assignments, students."""
    from server.store.courses import CourseRole

    engine = engine_for(data_dir)
    store = CourseStore(engine)
    table = Table(show_header=True, header_style="bold")
    for column in ("key", "title", "LMS context", "assignments", "students", "staff", "solutions after deadline"):
        table.add_column(column, overflow="fold")
    for course in store.all():
        table.add_row(
            escape(course.key),
            escape(course.title),
            escape(course.context_id or "-"),
            str(len(store.assignments(course.id))),
            str(len(store.members(course.id, CourseRole.STUDENT))),
            str(len(store.members(course.id, CourseRole.STAFF))),
            "yes" if course.solutions_after_deadline else "no",
        )
    console.print(table)


@courses_app.command("assign")
def assign(
    key: Annotated[str, typer.Argument(help="the course")],
    problem: Annotated[str, typer.Argument(help="the problem's slug")],
    opens: Annotated[
        str, typer.Option(help="opening time, earlier attempts do not count (ISO 8601; empty: now, or as it was)")
    ] = "",
    due: Annotated[str, typer.Option(help="deadline (ISO 8601; empty: none)")] = "",
    late: Annotated[LateRule, typer.Option(help="after the deadline: none (no credit) or penalty")] = LateRule.PENALTY,
    penalty_per_day: Annotated[float, typer.Option(help="fraction lost per started day late, 0-1")] = 0.0,
    penalty_cap: Annotated[float, typer.Option(help="the most that can be lost, 0-1")] = 1.0,
    grace_minutes: Annotated[int, typer.Option(help="minutes after the deadline still on time (0-1440)")] = 0,
    rule: Annotated[GradeRule, typer.Option(help="which attempt gives the grade: best or last")] = GradeRule.BEST,
    data_dir: DataDir = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Add a problem to a course, or change its dates and rules (LMS grades that change are sent).
    A new assignment without --opens opens now: attempts made before it do not count."""
    from server.courses import admin

    engine = engine_for(data_dir)
    course = find_course(engine, key)
    try:
        policy = Policy(
            opens_at=admin.parse_time(opens, "--opens"),
            due_at=admin.parse_time(due, "--due"),
            late_rule=late,
            penalty_per_day=penalty_per_day,
            penalty_cap=penalty_cap,
            grade_rule=rule,
            grace_minutes=grace_minutes,
        )
        lms = LtiCourseGrades(PassbackStore(engine))
        made = admin.change_assignment(CourseStore(engine), course, problem, policy, _problems(problems_dir), lms)
    except (CourseError, ValueError) as exc:
        raise _fail(str(exc)) from None
    # the opening time stored (now, for a new assignment without --opens), to the second, in UTC
    opening = f"opens {made.opens_at:%Y-%m-%d %H:%M:%S} UTC" if made.opens_at else "open from the start"
    console.print(
        f"{escape(course.key)}: {escape(problem)} {opening}, due {due or 'never'}, "
        f"late {late.value}"
        + (f" after {grace_minutes} min of grace" if grace_minutes and due else "")
        + (f" (-{penalty_per_day:g}/day, at most -{penalty_cap:g})" if late == LateRule.PENALTY and due else "")
        + f", grade {rule.value}"
    )


@courses_app.command("enroll")
def enroll(
    key: Annotated[str, typer.Argument(help="the course")],
    emails: Annotated[list[str], typer.Argument(help="accounts' emails")],
    role: Annotated[
        str,
        typer.Option(
            help="the course role: student or staff (staff see and manage this "
            "course's students, gradebook and assignments)"
        ),
    ] = "student",
    data_dir: DataDir = None,
) -> None:
    """Enroll accounts in a course (LTI launches enroll their users by themselves, with the role
    the LMS gives them in that course)."""
    from server.courses import admin

    engine = engine_for(data_dir)
    course = find_course(engine, key)
    for email in emails:
        try:
            admin.enroll(CourseStore(engine), UserStore(engine), course, email, role)
        except CourseError as exc:
            raise _fail(str(exc)) from None
    console.print(f"enrolled {len(emails)} in {escape(course.key)} as {escape(role)}")


@courses_app.command("solutions")
def solutions(
    key: Annotated[str, typer.Argument(help="the course")],
    after_deadline: Annotated[
        str,
        typer.Argument(
            help="on: students see the reference solution once "
            "their deadline has passed; off: only after "
            "their first ACCEPTED"
        ),
    ],
    data_dir: DataDir = None,
) -> None:
    """Whether a course's students see reference solutions after their deadline (on by default
    for courses made here, off for LMS courses: anyone who can make an LMS course is its staff)."""
    if after_deadline not in ("on", "off"):
        raise _fail("say on or off")
    engine = engine_for(data_dir)
    course = find_course(engine, key)
    CourseStore(engine).set_solutions_after_deadline(course.id, after_deadline == "on")
    console.print(
        f"{escape(course.key)}: reference solutions open "
        + ("after the deadline or a first ACCEPTED" if after_deadline == "on" else "after a first ACCEPTED")
    )


@courses_app.command("peers")
def peers(
    key: Annotated[str, typer.Argument(help="the course")],
    show: Annotated[
        str,
        typer.Argument(
            help="on: a student's verdict panel says how many others in the "
            "course made the same policy mistake and later fixed it; off "
            "(the default): it does not"
        ),
    ],
    data_dir: DataDir = None,
) -> None:
    """Whether students see that others in their course made the same mistake and fixed it."""
    if show not in ("on", "off"):
        raise _fail("say on or off")
    engine = engine_for(data_dir)
    course = find_course(engine, key)
    CourseStore(engine).set_peer_insight(course.id, show == "on")
    console.print(
        f"{escape(course.key)}: students {'see' if show == 'on' else 'do not see'} how many others made "
        f"the same mistake and fixed it"
    )


@courses_app.command("extend")
def extend(
    key: Annotated[str, typer.Argument(help="the course")],
    problem: Annotated[str, typer.Argument(help="the assignment's problem")],
    email: Annotated[str, typer.Argument(help="the student's email")],
    due: Annotated[str, typer.Option(help="their deadline (ISO 8601)")],
    data_dir: DataDir = None,
) -> None:
    """Give one student their own deadline on one assignment."""
    from server.courses import admin

    engine = engine_for(data_dir)
    course = find_course(engine, key)
    try:
        due_at = admin.parse_time(due, "--due")
        if due_at is None:
            raise CourseError("--due: give the student's deadline")
        admin.extend(CourseStore(engine), course, problem, email, due_at, LtiCourseGrades(PassbackStore(engine)))
    except CourseError as exc:
        raise _fail(str(exc)) from None
    console.print(f"{escape(email)} is due {due_at.isoformat()} on {escape(problem)} in {escape(course.key)}")


@courses_app.command("sync")
def sync(
    key: Annotated[str, typer.Argument(help="the LMS course (see `remat-judge courses list`)")],
    data_dir: DataDir = None,
) -> None:
    """Sync an LMS course's roster from its LMS (LTI Names and Role Provisioning Services 2.0):
    the gradebook then lists the students who never launched. Needs a launch from the course
    that carried the service's claim; on any failure the roster synced before is kept."""
    from server.lti.ags import AgsClient
    from server.lti.keys import load_or_create
    from server.lti.nrps import RosterError, sync_course
    from server.store.lti_store import LtiStore

    settings = settings_for(data_dir=data_dir)
    engine = engine_for(data_dir)
    course = find_course(engine, key)
    try:
        report = sync_course(
            course,
            store=LtiStore(engine),
            courses=CourseStore(engine),
            client=AgsClient(timeout_s=settings.callback_timeout_s, allow_networks=settings.lti_allow_networks),
            key=load_or_create(settings.data_dir),
        )
    except RosterError as exc:
        err.print(f"[red]{escape(course.key)}: {escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    console.print(
        f"{escape(course.key)}: {escape(report.message)} ({report.pages} page{'s' if report.pages != 1 else ''})"
    )


@courses_app.command("gradebook")
def gradebook(
    key: Annotated[str, typer.Argument(help="the course")],
    csv_path: Annotated[Path | None, typer.Option("--csv", help="write CSV to this file (- : stdout)")] = None,
    data_dir: DataDir = None,
) -> None:
    """Students x assignments: score, attempts, solved time, late."""
    from server.courses.gradebook import gradebook as gradebook_of

    engine = engine_for(data_dir)
    book = gradebook_of(CourseStore(engine), find_course(engine, key))
    if csv_path is not None:
        text = book.csv()
        if str(csv_path) == "-":
            print(text, end="")
        else:
            csv_path.write_text(text, encoding="utf-8")
            console.print(
                f"wrote {len(book.students)} students x {len(book.assignments)} assignments to {escape(str(csv_path))}"
            )
        return
    table = Table(title=escape(book.course.title), show_header=True, header_style="bold")
    table.add_column("student", overflow="fold")
    for assignment in book.assignments:
        table.add_column(escape(assignment.problem), overflow="fold")
    table.add_column("solved")
    for student in book.students:
        cells = []
        for assignment in book.assignments:
            s = book.cells[(student.id, assignment.id)].standing
            cells.append("-" if s.score is None else f"{s.score:.2f} ({s.attempts})" + (" late" if s.late else ""))
        table.add_row(
            escape(f"{student.display_name} <{student.email}>"),
            *cells,
            f"{book.solved(student.id)} of {len(book.assignments)}",
        )
    for member in book.unlaunched:
        table.add_row(
            escape(f"{member.name or member.member_id} <{member.email or '-'}>"),
            *["-" for _ in book.assignments],
            "never launched",
        )
    console.print(table)


def regrade(
    slug: Annotated[str, typer.Argument(help="the problem whose submissions to grade again")],
    wait: Annotated[bool, typer.Option(help="wait for the new verdicts and list those that changed")] = True,
    timeout: Annotated[float, typer.Option(help="seconds to wait at most")] = 1800.0,
    data_dir: DataDir = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
) -> None:
    """Grade every finished submission of a problem again with its published version (after a new
    version is published; the working folder counts once published): old verdicts are kept,
    changed ones are listed, changed LMS grades are sent. The running judge (server or workers)
    does the grading."""
    from server.courses import admin
    from server.store.regrades import RegradeStore

    engine = engine_for(data_dir)
    try:
        started = admin.start_regrade(RegradeStore(engine), _problems(problems_dir), slug, requested_by="cli")
    except CourseError as exc:
        raise _fail(str(exc)) from None
    console.print(
        f"regrade #{started.id}: {started.submissions} submissions of {escape(slug)} queued again "
        f"(version {started.problem_version})"
    )
    store = RegradeStore(engine)
    deadline = time.monotonic() + timeout
    progress = store.progress(started.id)
    assert progress is not None
    while wait and not progress.done and time.monotonic() < deadline:
        time.sleep(1.0)
        progress = store.progress(started.id)
        assert progress is not None
    print_progress(progress)
    if wait and not progress.done:
        err.print(
            f"[yellow]{progress.total - progress.finished} still waiting after {timeout:g} s: is the judge "
            f"running? `remat-judge problems regrades {started.id}` shows it later[/]"
        )
        raise typer.Exit(1)


def regrades(
    regrade_id: Annotated[int | None, typer.Argument(help="one regrade (default: list recent ones)")] = None,
    data_dir: DataDir = None,
) -> None:
    """Recent regrades, or one regrade's progress and changed verdicts."""
    from server.store.regrades import RegradeStore

    store = RegradeStore(engine_for(data_dir))
    if regrade_id is None:
        table = Table(show_header=True, header_style="bold")
        for column in ("id", "problem", "version", "submissions", "by", "started (UTC)"):
            table.add_column(column)
        for r in store.recent():
            table.add_row(
                str(r.id),
                escape(r.problem),
                r.problem_version or "-",
                str(r.submissions),
                escape(r.requested_by),
                r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            )
        console.print(table)
        return
    progress = store.progress(regrade_id)
    if progress is None:
        raise _fail(f"no regrade #{regrade_id}")
    print_progress(progress)


def print_progress(progress) -> None:
    console.print(f"{progress.finished} of {progress.total} graded again; {len(progress.changes)} changed")
    if not progress.changes:
        return
    table = Table(show_header=True, header_style="bold")
    table.add_column("submission", no_wrap=True)  # whole ids: they are what `remat-judge` and the API take
    for column in ("by", "submitted (UTC)", "before", "after"):
        table.add_column(column, overflow="fold")
    for c in progress.changes:
        table.add_row(
            c.submission_id,
            escape(c.owner),
            c.submitted_at.strftime("%Y-%m-%d %H:%M:%S"),
            f"{c.old_verdict} ({_score(c.old_score)})",
            f"{c.new_verdict} ({_score(c.new_score)})",
        )
    console.print(table)


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
