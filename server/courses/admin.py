"""What instructors do to courses and problems, shared by the CLI (`remat-judge courses`,
`remat-judge problems regrade`) and the instructor pages, so both doors behave alike:

- change an assignment's rules or give an extension, then make the LMS passback of the students
  concerned pending (the sender recomputes each standing and sends only what changed); a new
  assignment without an opening time opens when it is made (`opening_time`);
- start a regrade of a problem (its package must load: a broken new version is refused before
  any verdict is touched).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from graders.problems.problem import ProblemRepository
from graders.problems.spec import ProblemError
from server.store.accounts import UserStore
from server.store.course_store import CourseStore
from server.store.courses import Assignment, Course, CourseError, CourseRole, Policy
from server.store.db import utcnow
from server.store.lms_grades import LmsGrades
from server.store.regrades import Regrade, RegradeStore


def parse_time(text: str | None, what: str) -> datetime | None:
    """An ISO 8601 time ("2026-12-01T23:59", "2026-12-01 23:59:00+01:00"); without an offset it is
    UTC. Empty or None: None.

    Raises:
        CourseError: not a time.
    """
    if text is None or not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CourseError(
            f"{what}: {text!r} is not a time (ISO 8601, e.g. 2026-12-01T23:59, UTC unless an offset is given)"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def opening_time(given: datetime | None, existing: Assignment | None, now: datetime) -> datetime | None:
    """The opening time to store for an assignment (attempts before it do not count).

    Args:
        given: the one the instructor gave (`--opens`, the page's field), or None for none.
        existing: the assignment as it is, or None when it is new.
        now: the moment of assigning.

    Returns:
        `given` when it is given, but the existing opening itself when `given` is that time as
        the page shows it (to the minute: saving the page's form keeps the opening as it was).
        Without one, a new assignment opens `now`, so attempts made before it was assigned do
        not count, and an existing one keeps its opening (None for an assignment made by an LMS
        launch: open from the start).
    """
    if existing is not None and existing.opens_at is not None:
        if given is None or given == existing.opens_at.replace(second=0, microsecond=0):
            return existing.opens_at
    if given is not None or existing is not None:
        return given
    return now


def change_assignment(
    courses: CourseStore, course: Course, problem: str, policy: Policy, problems: ProblemRepository, lms: LmsGrades
) -> Assignment:
    """Makes or changes `course`'s assignment of `problem`, then re-sends changed LMS grades. The
    opening time stored is `opening_time`'s: without one, a new assignment opens now.

    Raises:
        CourseError: the judge has no such problem, or a new assignment without an opening time
            has a deadline already past.
    """
    try:
        problems.get(problem)
    except (KeyError, ProblemError):
        raise CourseError(f"the judge has no problem {problem!r}") from None
    now, existing = utcnow(), courses.assignment(course.id, problem)
    if existing is None and policy.opens_at is None and policy.due_at is not None and policy.due_at < now:
        raise CourseError("the deadline is already past, and without an opening time it opens now: give one")
    opens_at = opening_time(policy.opens_at, existing, now)
    assignment = courses.set_assignment(course.id, problem, replace(policy, opens_at=opens_at))
    lms.standings_changed(course, problem)
    return assignment


def extend(
    courses: CourseStore, course: Course, problem: str, email: str, due_at: datetime, lms: LmsGrades
) -> Assignment:
    """Gives the student with `email` their own deadline on `course`'s assignment of `problem`,
    then re-sends their LMS grade if it changed.

    Raises:
        CourseError: no such assignment or account, or the account is not in the course.
    """
    assignment = courses.assignment(course.id, problem)
    if assignment is None:
        raise CourseError(f"the course {course.key!r} has no assignment {problem!r}")
    user = courses.member_by_email(course.id, email)  # the sign-in email, or the LMS's for LTI accounts
    if user is None:
        raise CourseError(f"nobody with the email {email!r} is in the course {course.key!r}")
    courses.extend(assignment.id, user.id, due_at)
    lms.standings_changed(course, problem, user_id=user.id)
    return assignment


def enroll(courses: CourseStore, users: UserStore, course: Course, email: str, role: str) -> None:
    """Enrolls the account with `email` as `role` (`CourseRole`: staff or student).

    Raises:
        CourseError: no such account, or an unknown role.
    """
    try:
        as_role = CourseRole(role)
    except ValueError:
        raise CourseError(f"a course role is staff or student, not {role!r}") from None
    user = users.by_email(email)
    if user is None:
        raise CourseError(f"no account with the email {email!r} (students sign up, or launch from the LMS)")
    courses.enroll(course.id, user.id, as_role)


def start_regrade(regrades: RegradeStore, problems: ProblemRepository, slug: str, requested_by: str) -> Regrade:
    """Re-queues every finished submission of `slug` (`RegradeStore.start`) once its package loads.

    Raises:
        CourseError: no such problem, or its package does not load (nothing is re-queued).
    """
    try:
        problem = problems.get(slug)
    except KeyError:
        raise CourseError(f"the judge has no problem {slug!r}") from None
    except ProblemError as exc:
        raise CourseError(f"the problem {slug!r} does not load, so nothing was re-queued: {exc}") from None
    return regrades.start(slug, problem_version=problem.version, requested_by=requested_by)
